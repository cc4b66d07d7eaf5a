"""bench/peers.py's protocol (issue 52): a published run takes held-out seeds; tuning seeds and our-side changes are
an ablation that says so. The refusals come before anything starts."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


def peers(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "bench/peers.py", "--peers", "--rows", "cartpole-ppo", *arguments],
                          cwd=REPOSITORY, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("arguments", [("--seeds", "0", "100"), ("--changes", "train.lr=0.01")])
def test_an_ablation_without_tuning_exits_2(arguments):
    assert peers(*arguments).returncode == 2


@pytest.mark.parametrize("arguments", [("--seeds", "0", "100"), ("--changes", "train.lr=0.01")])
def test_the_error_line_names_the_option(arguments):
    assert peers(*arguments).stderr.strip().splitlines()[-1].startswith(f"peers.py: error: {arguments[0]} ")


def test_the_refusal_names_the_held_out_seeds():
    assert "held-out seeds (100 and up)" in peers("--seeds", "3").stderr


@pytest.fixture(scope="module")
def peers_inside_a_venv(tmp_path_factory) -> tuple[Path, Path]:
    """The benchmark run from a virtual environment holding a package of its own (``peer_marker``), and the peers'
    environment its ``setup`` made (nothing installed: the packages come from the network)."""
    folder = tmp_path_factory.mktemp("venvs")
    benchmark = folder / "benchmark"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(benchmark)],
                   check=True, timeout=120)
    site = subprocess.run([str(benchmark / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    (Path(site) / "peer_marker.py").write_text("HERE = True\n")
    python = folder / "peers" / "bin" / "python"
    subprocess.run([str(benchmark / "bin" / "python"), "-c",
                    f"import sys; sys.path.insert(0, 'bench'); import peers; from pathlib import Path; "
                    f"peers.setup(Path({str(python)!r}), ())"], cwd=REPOSITORY, check=True, timeout=300)
    return python, folder / "peers" / "constraints.txt"


def test_the_peers_see_the_benchmarks_own_virtual_environment(peers_inside_a_venv):
    python, _ = peers_inside_a_venv
    assert subprocess.run([str(python), "-c", "import peer_marker"], timeout=60).returncode == 0


def test_the_peers_import_our_torch_build(peers_inside_a_venv):
    python, _ = peers_inside_a_venv
    seen = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                          capture_output=True, text=True, timeout=60).stdout.strip()
    assert seen == importlib.metadata.version("torch")


def test_the_peers_are_installed_under_our_torch_version(peers_inside_a_venv):
    _, constraints = peers_inside_a_venv
    assert f"torch=={importlib.metadata.version('torch')}" in constraints.read_text().splitlines()
