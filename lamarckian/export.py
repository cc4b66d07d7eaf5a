"""Export a trained policy: ``python export.py --checkpoint FILE --onnx policy.onnx [-c FILE...] [-m KEY=VALUE...]``.

Writes the deterministic policy (observation normalization included) as ONNX, then runs it in onnxruntime beside
torch on observations drawn from the observation space and prints the largest difference. The configuration is the
checkpoint's own (``checkpoints/checkpoint-*.pt`` carry it); a snapshot (``snapshots/``) needs the run's ``-c``
files. A remote worker runs the file without torch: ``python -m lamarckian.remote worker --onnx policy.onnx``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .cli import OneLineParser, usage_error
from .config import load

SAMPLES = 256       # observations of the onnxruntime check


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="export.py", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint-*.pt file")
    parser.add_argument("--onnx", type=Path, required=True, help="the .onnx file to write")
    parser.add_argument("-c", "--config", nargs="+", action="extend", default=[], metavar="FILE")
    parser.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    arguments = parser.parse_args(argv)
    if not arguments.checkpoint.is_file():
        parser.error(f"--checkpoint {arguments.checkpoint}: no such file")
    return arguments


def policy_of(state: Mapping[str, Any], arguments: argparse.Namespace) -> Any:
    """The acting network of the checkpoint ``state`` with its weights."""
    from .mdp import create_mdp
    from .rl.algorithms.build import build_model
    from .rl.policies import refuse_policies

    if arguments.config or arguments.modify:
        config = load(arguments.config, arguments.modify)
    elif state.get("config") is not None:
        config = state["config"]
    else:
        raise ValueError(f"--checkpoint {arguments.checkpoint} carries no configuration (a snapshot): give the run's "
                         "-c files")
    refuse_policies(config, "export.py")
    mdp = create_mdp(config["mdp"], seed=0)
    try:
        model = build_model(mdp, config)
    finally:
        mdp.close()
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as error:
        raise ValueError(f"--checkpoint {arguments.checkpoint}: its weights do not fit the network of this "
                         f"configuration ({str(error).splitlines()[0]})") from None
    return model.eval()


def largest_difference(model: Any, path: Path) -> float:
    """max |onnxruntime − torch| over both outputs on :data:`SAMPLES` observations of the model's space."""
    import onnxruntime
    import torch

    from .model.export import DeterministicPolicy

    space = model.batcher.space
    space.seed(0)
    observations = model.batcher([space.sample() for _ in range(SAMPLES)])
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ours = session.run(None, {"observation": observations})
    with torch.no_grad():
        reference = DeterministicPolicy(model)(torch.from_numpy(observations))
    return max(float(np.abs(np.asarray(a, np.float64) - b.numpy().astype(np.float64)).max())
               for a, b in zip(ours, reference))


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    try:
        import torch

        from .model.export import export_onnx
        from .record.checkpoint import upgrade_checkpoint

        try:
            state = torch.load(arguments.checkpoint, map_location="cpu", weights_only=True)
        except Exception as error:  # noqa: BLE001 - any unreadable file is the user's culprit
            raise ValueError(f"--checkpoint {arguments.checkpoint}: unreadable ({error})") from None
        model = policy_of(upgrade_checkpoint(state, arguments.checkpoint), arguments)
        path = export_onnx(model, arguments.onnx)
    except Exception as error:  # noqa: BLE001 - usage_error re-raises what is not a usage error
        return usage_error("export.py", error)
    print(f"wrote {path}: inputs observation {tuple(model.batcher.shape)}, outputs action and policy_action; "
          f"onnxruntime vs torch on {SAMPLES} observations: max |difference| {largest_difference(model, path):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
