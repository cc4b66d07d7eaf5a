"""Ant Sumo physics alone: env-steps/s of the physics batch (one physics step per env step), the control-step
rate at the 60 Hz setting (2 physics steps per control step), and the task's step (physics + rules +
observations) at 60 Hz, for several environment counts. References measured in the same run: CPU MuJoCo stepping
the same MJCF model, 64 environments per core, in one process or one per core, whichever is faster; and on the mjx
backend a bare vmapped ``mjx.step`` of the same model (no torch, no hand-over, no resets): the limit our batch
is held to, and our batch's step without the DLPack hand-over of the controls, to show where the gap goes.

    python bench/vec_physics.py                          # where MJX and a GPU are: mjx on cuda; else the CPU
    python bench/vec_physics.py --backend mjx --device cuda --envs 16384 --json $OUT/physics.json

Each figure is the median of ``--repeats`` timed blocks of ``--steps`` calls after a warm-up (which compiles).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import seconds_per_call  # noqa: E402

from lamarckian.mdp.vec import AntSumo, SumoSettings, placement  # noqa: E402
from lamarckian.mdp.vec.physics import create_physics  # noqa: E402
from lamarckian.mdp.vec.scene import scene_xml  # noqa: E402


def wait(tensor_source) -> None:
    """Block until the device has finished everything queued (reads one element back)."""
    float(tensor_source()[0].reshape(-1)[0])


COMPILES: dict[str, float] = {}   # seconds of each measurement's first call (compiling or loading from the cache)


def rate(call, finished, count: int, steps: int, repeats: int, name: str) -> float:
    """``count`` items per call: the median items per second (after two untimed calls; the first one, which
    compiles, is timed into ``COMPILES[name]`` and printed)."""
    started = time.perf_counter()
    call()
    finished()
    COMPILES[name] = round(time.perf_counter() - started, 2)
    if COMPILES[name] >= 0.1:
        print(f"  first call of {name} (compile or cache load): {COMPILES[name]:.1f} s", flush=True)
    return count / seconds_per_call(call, steps, repeats, finished, warmup=1)


def physics_rate(backend: str, device: str, envs: int, substeps: int, steps: int, repeats: int,
                 workers: int = 1) -> float:
    """Env-steps/s of the raw physics batch with ``substeps`` physics steps per env step (random controls)."""
    physics = create_physics(backend, scene_xml(), envs, device, workers)
    ctrl = torch.rand(envs, physics.model.nu, device=physics.device) - 0.5
    try:
        return rate(lambda: physics.step(ctrl, substeps), lambda: wait(physics.state), envs, steps, repeats,
                    f"{backend} {envs} envs × {substeps} substeps, {workers} process(es)")
    finally:
        physics.close()


def bare_mjx_rates(device: str, envs: int, steps: int, repeats: int, own: bool = True) -> dict[str, float]:
    """Env-steps/s (one physics step each) of (a) a bare ``jit(vmap(mjx.step))`` of the scene, state and controls
    as JAX arrays, and (b) unless ``own`` is false, our MJX batch's own jitted step fed a JAX control array (no
    DLPack hand-over)."""
    import jax
    import mujoco
    from mujoco import mjx

    from lamarckian.mdp.vec.mjx import MJXBatch, jax_device

    model = mujoco.MjModel.from_xml_string(scene_xml())
    target = jax_device(device)
    mjx_model = mjx.put_model(model, device=target)
    host = mujoco.MjData(model)
    mujoco.mj_forward(model, host)
    single = mjx.put_data(model, host, device=target)
    state = [jax.jit(jax.vmap(lambda _: single))(jax.numpy.arange(envs))]
    ctrl = jax.device_put(jax.random.uniform(jax.random.PRNGKey(0), (envs, model.nu)) - 0.5, target)
    bare = jax.jit(jax.vmap(lambda data, c: mjx.step(mjx_model, data.replace(ctrl=c))))

    def bare_step() -> None:
        state[0] = bare(state[0], ctrl)

    rates = {"bare": rate(bare_step, lambda: state[0].qpos.block_until_ready(), envs, steps, repeats,
                          f"bare mjx.step {envs} envs")}
    if not own:
        return rates
    batch = MJXBatch(scene_xml(), envs, device)
    advance = batch._advance(1)

    def own_step() -> None:
        batch.data = advance(batch.data, ctrl)

    rates["own_jax_ctrl"] = rate(own_step, lambda: batch.data.qpos.block_until_ready(), envs, steps, repeats,
                                 f"our mjx step fed JAX controls {envs} envs")
    batch.close()
    return rates


def task_rate(backend: str, device: str, envs: int, steps: int, repeats: int) -> float:
    """Control steps/s (per environment) of the whole Ant Sumo step at 60 Hz, random actions."""
    task = AntSumo(envs, SumoSettings(backend=backend, device=device))
    task.reset()
    actions = torch.rand(2 * envs, 8, device=task.device) * 2 - 1
    try:
        return rate(lambda: task.step(actions), lambda: wait(task.physics.state), envs, steps, repeats,
                    f"task {envs} envs")
    finally:
        task.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--envs", type=int, nargs="+", help="environment counts (default: 4096 16384 32768 on a "
                                                            "GPU, 16 64 on the CPU)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--targets-only", action="store_true",
                        help="only the physics rate and the bare vmapped mjx.step beside it (the two targets): no "
                             "60 Hz control or task rows, no JAX-fed variant of our step (fewer compiles)")
    args = parser.parse_args()
    backend, device, _ = placement({"backend": args.backend, "device": args.device, "num_envs": 1})
    counts = args.envs or ([4096, 16384, 32768] if device.startswith("cuda") else [16, 64])
    cores = os.cpu_count() or 1
    card = torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "CPU"
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} ({card}), backend {backend} on {device}, torch "
          f"{torch.__version__}; Ant Sumo scene (2 ants, 43 contact pairs, iterations 4 / ls 8, dt 1/120 s)")
    reference, workers = max((physics_rate("mujoco", "cpu", 64 * cores, 1, args.steps, args.repeats, workers=n), n)
                             for n in sorted({1, cores}))
    print(f"reference: CPU MuJoCo, {64 * cores} envs in {workers} process(es) (the faster of 1 and {cores}): "
          f"{reference:,.0f} env-steps/s (1 physics step each)")
    print(f"{'envs':>7} {'physics env-steps/s':>20} {'60 Hz control steps/s':>22} {'task steps/s':>13} "
          f"{'× CPU MuJoCo':>13}")
    rows = []
    for envs in counts:
        single = physics_rate(backend, device, envs, 1, args.steps, args.repeats)
        rows.append({"envs": envs, "physics_env_steps_per_s": single, "speedup_vs_cpu_mujoco": single / reference})
        if not args.targets_only:
            rows[-1]["control_steps_per_s"] = physics_rate(backend, device, envs, 2, args.steps, args.repeats)
            rows[-1]["task_steps_per_s"] = task_rate(backend, device, envs, args.steps, args.repeats)
        control, whole = (f"{rows[-1][key]:,.0f}" if key in rows[-1] else "-"
                          for key in ("control_steps_per_s", "task_steps_per_s"))
        print(f"{envs:>7} {single:>20,.0f} {control:>22} {whole:>13} {single / reference:>12.1f}×", flush=True)
        if backend == "mjx":
            bare = bare_mjx_rates(device, envs, args.steps, args.repeats, own=not args.targets_only)
            rows[-1].update({"bare_mjx_env_steps_per_s": bare["bare"], "ratio_to_bare_mjx": single / bare["bare"]})
            own = (f"our jitted step fed JAX controls {bare['own_jax_ctrl']:,.0f}; " if "own_jax_ctrl" in bare
                   else "")
            rows[-1].update({"own_step_jax_ctrl": bare["own_jax_ctrl"]} if "own_jax_ctrl" in bare else {})
            print(f"{'':>7} bare vmapped mjx.step {bare['bare']:,.0f} env-steps/s; {own}ours with the torch "
                  f"hand-over {single:,.0f} = {single / bare['bare']:.2f} of bare", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "card": card, "backend": backend,
                                         "device": device, "cpu_mujoco_reference": reference, "rows": rows,
                                         "first_call_seconds": COMPILES}, indent=1))


if __name__ == "__main__":
    main()
