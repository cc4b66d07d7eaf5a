"""Pictures of one environment of a ring task (Ant Sumo, Ant Battle) from MuJoCo's offscreen renderer.

Whatever the physics backend (CPU MuJoCo or MJX on a GPU), the state of the chosen environment is copied into a
host ``MjData`` of the task's own scene and drawn from a camera above the ring; the ring is drawn at its current
radius. The renderer needs OpenGL: ``MUJOCO_GL=egl`` (a GPU driver's or Mesa's EGL, no display needed),
``osmesa`` or ``glfw`` (a display).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .ring import AntRing
from .scene import ANT_COLOURS


def ant_colour(seat: int) -> tuple[str, tuple[int, int, int]]:
    """Seat ``seat``'s colour name and 8-bit RGB (as drawn in the scene)."""
    name, rgb = ANT_COLOURS[seat % len(ANT_COLOURS)]
    red, green, blue = rgb
    return name, (int(255 * red), int(255 * green), int(255 * blue))


def no_opengl(error: BaseException) -> RuntimeError:
    """The one-line error for an OpenGL back end that does not start (``error``: what MuJoCo or PyOpenGL raised)."""
    backend = os.environ.get("MUJOCO_GL", "the default (glfw)")
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    return RuntimeError(f"MuJoCo's renderer found no OpenGL with MUJOCO_GL={backend} ({reason}); try "
                        "MUJOCO_GL=egl or MUJOCO_GL=osmesa")


def import_mujoco_renderer() -> Any:
    """``import mujoco``, with a GL back end that fails (MuJoCo 4 opens the one ``MUJOCO_GL`` names while it is
    imported) reported as :func:`no_opengl`'s RuntimeError instead of a PyOpenGL traceback."""
    try:
        import mujoco
    except ImportError:
        raise
    except Exception as error:  # noqa: BLE001 - any GL failure is reported the same way
        raise no_opengl(error) from None
    return mujoco


class RingView:
    """Renders environment ``env`` of ``task`` as ``(height, width, 3)`` uint8 RGB frames.

    Raises RuntimeError with one line when MuJoCo finds no OpenGL.
    """

    def __init__(self, task: AntRing, width: int = 480, height: int = 360, env: int = 0) -> None:
        mujoco = import_mujoco_renderer()
        self.mujoco, self.task, self.env = mujoco, task, env
        self.model = mujoco.MjModel.from_xml_string(task.scene)
        self.data = mujoco.MjData(self.model)
        try:
            self.renderer = mujoco.Renderer(self.model, height, width)
        except Exception as error:  # noqa: BLE001 - any GL failure is reported the same way
            raise no_opengl(error) from None
        self.camera = mujoco.MjvCamera()
        self.camera.lookat[:] = (0.0, 0.0, 0.3)
        self.camera.distance = 2.4 * task.settings.ring
        self.camera.elevation, self.camera.azimuth = -50.0, 90.0
        self.ring_site = self.model.site("ring").id

    def frame(self) -> np.ndarray:
        """The environment now."""
        qpos, qvel = self.task.physics.state()
        self.data.qpos[:] = qpos[self.env].detach().cpu().numpy()
        self.data.qvel[:] = qvel[self.env].detach().cpu().numpy()
        self.mujoco.mj_forward(self.model, self.data)
        self.model.site_size[self.ring_site, 0] = float(self.task.ring_radius()[self.env])
        self.renderer.update_scene(self.data, self.camera)
        return self.renderer.render().copy()

    def close(self) -> None:
        self.renderer.close()
