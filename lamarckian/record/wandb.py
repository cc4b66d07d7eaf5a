"""Optional Weights & Biases logging of the same scalars TensorBoard gets (``evaluator.wandb: PROJECT``).

``WANDB_MODE=offline`` (wandb's own variable) keeps the run in ``<run directory>/wandb`` without an account.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping


class WandbScalars:
    """Scalars to a wandb run of ``project``; does nothing when ``project`` is empty.

    Args:
        project: the wandb project (``evaluator.wandb``), or None.
        root: the run directory (wandb's files go under it; its name names the wandb run).
        config: the run's configuration (shown by wandb).

    Raises:
        ValueError: wandb is not installed (the message names the extra to install).
    """

    def __init__(self, project: str | None, root: Path | None, config: Mapping[str, Any]) -> None:
        self.project, self.root, self.config = project, root, config
        self.run: Any = None
        if project:
            try:
                import wandb  # noqa: F401
            except ImportError:
                raise ValueError(f"evaluator.wandb={project!r} needs wandb: pip install 'lamarckian[wandb]'") from None

    def open(self) -> None:
        """Start (or resume, by the run directory's name) the wandb run."""
        if not self.project or self.run is not None:
            return
        import wandb

        from .checkpoint import plain

        folder = str(self.root) if self.root is not None else None
        name = self.root.name if self.root is not None else None
        self.run = wandb.init(project=str(self.project), dir=folder, name=name, config=plain(self.config),
                              reinit="finish_previous")

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        if self.run is not None:
            self.run.log({tag: float(value) for tag, value in scalars.items() if value is not None}, step=int(step))

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
