"""The package as a user installs it: a wheel built from this tree, installed into a fresh virtual environment, runs
from any directory with its defaults and bundled configs (no checkout beside it)."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The python of a fresh venv holding only the wheel (the dependencies are reached through a path file that
    names this interpreter's site-packages, so nothing is downloaded)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"          # a clean copy: setuptools' build/ folder would keep files deleted since
    for name in ("pyproject.toml", "README.md"):
        source.mkdir(exist_ok=True)
        shutil.copy(REPOSITORY / name, source / name)
    shutil.copytree(REPOSITORY / "lamarckian", source / "lamarckian",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(root / "dist"), str(source)], check=True, capture_output=True, timeout=600)
    wheel = next((root / "dist").glob("lamarckian-*.whl"))
    venv.EnvBuilder(with_pip=False).create(root / "env")
    python = root / "env" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=600)
    packages = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    (Path(packages) / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def run(python: Path, *arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *arguments], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_the_wheel_runs_from_another_directory(installed, tmp_path):
    where = run(installed, "-c", "import lamarckian; print(lamarckian.__file__)", cwd=tmp_path)
    assert where.returncode == 0, where.stdout + where.stderr
    assert str(installed.parents[1]) in where.stdout, where.stdout + where.stderr
    for program in ("train", "evolve", "evaluate"):
        completed = run(installed, "-m", f"lamarckian.{program}", "--help", cwd=tmp_path)
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert "usage:" in completed.stdout, completed.stderr[-2000:]


def test_the_wheel_carries_the_defaults_and_the_bundled_configs(installed, tmp_path):
    code = ("from lamarckian.config import load; c = load(['mdp/gym.yml', 'mdp/gym/cartpole.yml', 'rl/ppo.yml']); "
            "print(c['mdp']['gym']['id'], c['train']['batch'])")
    completed = run(installed, "-c", code, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.split()[0] == "CartPole-v1", completed.stderr[-2000:]


def test_a_users_config_folder_comes_before_the_bundled_one(installed, tmp_path):
    (tmp_path / "config" / "mdp").mkdir(parents=True)
    (tmp_path / "config" / "mdp" / "gym.yml").write_text("mdp:\n  create: gym\n  gym:\n    id: Acrobot-v1\n")
    code = "from lamarckian.config import load; print(load(['mdp/gym.yml'])['mdp']['gym']['id'])"
    completed = run(installed, "-c", code, cwd=tmp_path)
    assert completed.stdout.strip() == "Acrobot-v1", completed.stderr[-2000:]


def test_the_default_job_starts_from_the_wheel(installed, tmp_path):
    """``python -m lamarckian.train`` from a directory without a checkout: the built-in default (Pong self-play),
    cut to two iterations in one process."""
    completed = run(installed, "-m", "lamarckian.train", "--debug", "-m", f"root={tmp_path / 'run'}",
                    "sample.envs=2", "train.batch=256", "evaluator.episodes=2", "evaluator.progress=false",
                    "evaluator.terminate=self.iteration >= 2", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "holds after 2 iterations" in completed.stderr, completed.stderr[-2000:]
    assert (tmp_path / "run" / "checkpoints").is_dir()
