"""The MJCF scene of an ant ring fight: N ants (the classic 8-joint ant) on a floor, a ring of radius ``ring``.

Joints are driven by position actuators (PD: ``kp`` stiffness, ``kd`` damping); the task maps actions in
[-1, 1] onto each joint's range. Contacts: with ``explicit_pairs`` only floor-(torso, thighs, feet) and
ant-ant (torso, feet) pairs are listed (43 for two ants; MJX pays per contact slot), otherwise MuJoCo's
all-pairs collision finds them.
"""

from __future__ import annotations

import math

#: each seat's colour (name, RGB in [0, 1]): seat 0 red, 1 blue, 2 green, 3 yellow, then again
ANT_COLOURS = (("red", (0.8, 0.3, 0.3)), ("blue", (0.3, 0.4, 0.8)), ("green", (0.3, 0.7, 0.3)),
               ("yellow", (0.8, 0.7, 0.2)))
#: (hip angle in degrees, direction of the leg in the xy plane) per leg: front-left, front-right, back-left, back-right
LEGS = (("fl", 1, 1), ("fr", -1, 1), ("bl", -1, -1), ("br", 1, -1))
HIP_RANGE = (-30.0, 30.0)        # degrees
ANKLE_RANGES = {1: (30.0, 70.0), -1: (-70.0, -30.0)}  # degrees, by the sign of x*y of the leg direction


def _ant(index: int, x: float, y: float, yaw: float, rgba: str) -> str:
    legs = []
    for name, sx, sy in LEGS:
        leg_x, leg_y = 0.2 * sx, 0.2 * sy
        ankle_lo, ankle_hi = ANKLE_RANGES[1 if sx * sy > 0 else -1]
        legs.append(f"""
      <body name="a{index}_{name}_leg" pos="0 0 0">
        <geom name="a{index}_{name}_aux" type="capsule" fromto="0 0 0 {leg_x} {leg_y} 0" size="0.08" rgba="{rgba}"/>
        <body name="a{index}_{name}_thigh" pos="{leg_x} {leg_y} 0">
          <joint name="a{index}_{name}_hip" type="hinge" axis="0 0 1" range="{HIP_RANGE[0]} {HIP_RANGE[1]}"/>
          <geom name="a{index}_{name}_thigh" type="capsule" fromto="0 0 0 {leg_x} {leg_y} 0" size="0.08" rgba="{rgba}"/>
          <body name="a{index}_{name}_shin" pos="{leg_x} {leg_y} 0">
            <joint name="a{index}_{name}_ankle" type="hinge" axis="{-sy} {sx} 0" range="{ankle_lo} {ankle_hi}"/>
            <geom name="a{index}_{name}_foot" type="capsule" fromto="0 0 0 {2 * leg_x} {2 * leg_y} 0" size="0.08"
                  rgba="{rgba}"/>
          </body>
        </body>
      </body>""")
    half = yaw / 2
    return f"""
    <body name="a{index}_torso" pos="{x} {y} 0.75" quat="{math.cos(half)} 0 0 {math.sin(half)}">
      <freejoint name="a{index}_root"/>
      <geom name="a{index}_torso" type="sphere" size="0.25" rgba="{rgba}"/>{''.join(legs)}
    </body>"""


def ant_geoms(index: int, thighs: bool) -> list[str]:
    """Names of ant ``index``'s colliding geoms: torso and feet (and thighs, for the floor)."""
    return [f"a{index}_torso"] + [f"a{index}_{name}_{part}" for name, _, _ in LEGS
                                  for part in (("thigh", "foot") if thighs else ("foot",))]


def scene_xml(ants: int = 2, ring: float = 3.0, kp: float = 85.0, kd: float = 2.0, timestep: float = 1 / 120,
              iterations: int = 4, ls_iterations: int = 8, explicit_pairs: bool = True, armature: float = 1.0,
              damping: float = 1.0) -> str:
    """The MJCF of ``ants`` ants spaced on a circle inside the ring (positions are re-drawn at reset);
    ``timestep`` in seconds, solver ``iterations`` / ``ls_iterations`` (MJX diverged at 1 iteration); every hinge
    gets ``armature`` (kg m², added rotor inertia) and ``damping`` (N m s/rad)."""
    colours = [" ".join(f"{c:g}" for c in rgb) + " 1" for _, rgb in ANT_COLOURS]
    bodies = "".join(_ant(i, 1.5 * math.cos(2 * math.pi * i / ants), 1.5 * math.sin(2 * math.pi * i / ants),
                          2 * math.pi * i / ants + math.pi, colours[i % len(colours)]) for i in range(ants))
    actuators = "".join(f'\n    <position joint="a{i}_{leg}_{part}" kp="{kp}" kv="{kd}" ctrllimited="false"/>'
                        for i in range(ants) for leg, _, _ in LEGS for part in ("hip", "ankle"))
    contact = ""
    if explicit_pairs:
        pairs = [f'<pair geom1="floor" geom2="{g}"/>' for i in range(ants) for g in ant_geoms(i, thighs=True)]
        pairs += [f'<pair geom1="{a}" geom2="{b}"/>' for i in range(ants) for j in range(i + 1, ants)
                  for a in ant_geoms(i, thighs=False) for b in ant_geoms(j, thighs=False)]
        contact = "\n  <contact>\n    " + "\n    ".join(pairs) + "\n  </contact>"
    return f"""<mujoco model="ant_ring">
  <compiler angle="degree"/>
  <option timestep="{timestep}" iterations="{iterations}" ls_iterations="{ls_iterations}"/>
  <visual>
    <global offwidth="1280" offheight="960"/>
  </visual>
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1="0.92 0.92 0.92" rgb2="0.82 0.82 0.82" width="256"
             height="256"/>
    <material name="grid" texture="grid" texrepeat="8 8" texuniform="true"/>
  </asset>
  <default>
    <geom contype="{0 if explicit_pairs else 1}" conaffinity="{0 if explicit_pairs else 1}" friction="1 0.5 0.5"
          density="5.0" condim="3"/>
    <joint damping="{damping}" armature="{armature}" limited="true"/>
  </default>
  <worldbody>
    <light name="sun" pos="0 0 8" dir="0 0 -1" directional="true" diffuse="0.6 0.6 0.6"/>
    <geom name="floor" type="plane" size="{ring + 2} {ring + 2} 0.1" material="grid"/>
    <site name="ring" type="cylinder" size="{ring} 0.005" rgba="0.2 0.2 0.2 0.3"/>{bodies}
  </worldbody>
  <actuator>{actuators}
  </actuator>{contact}
</mujoco>
"""
