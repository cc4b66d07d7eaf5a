"""``python -m lamarckian.remote``: key files, misuse answered with exit code 2 and the culprit named."""

from __future__ import annotations

import stat

import pytest

from lamarckian.remote.__main__ import main
from lamarckian.remote.keys import AllowList, load_pair, load_public


def test_keygen_writes_pairs_and_never_overwrites(tmp_path, capsys):
    assert main(["keygen", str(tmp_path), "server", "alice"]) == 0
    public, secret = load_pair(tmp_path / "alice.key_secret")
    assert load_public(tmp_path / "alice.key") == public
    assert len(secret) == 40
    assert stat.S_IMODE((tmp_path / "alice.key_secret").stat().st_mode) == 0o600
    assert main(["keygen", str(tmp_path), "alice"]) == 2
    assert "alice.key exists" in capsys.readouterr().err
    assert load_pair(tmp_path / "alice.key_secret") == (public, secret)      # untouched


def test_the_allow_list_leaves_out_the_server_and_the_trainer(tmp_path):
    assert main(["keygen", str(tmp_path), "server", "trainer", "alice", "bob"]) == 0
    allow = AllowList(tmp_path, exclude=(load_public(tmp_path / "server.key"), load_public(tmp_path / "trainer.key")))
    assert sorted(allow.names.values()) == ["alice", "bob"]
    assert allow.name_of(load_public(tmp_path / "alice.key")) == "alice"
    allow.ban(load_public(tmp_path / "alice.key"), 60)
    assert allow.name_of(load_public(tmp_path / "alice.key")) is None


def exit_code(argv: list[str]) -> int:
    """``main(argv)``'s exit code, whether returned or raised by the argument parser."""
    try:
        return main(argv)
    except SystemExit as error:
        return error.code


@pytest.mark.parametrize("argv, culprit", [
    (["server", "--bind", "tcp://127.0.0.1:*", "--keys", "/nonexistent"], "server.key_secret"),
    (["worker", "--server", "tcp://127.0.0.1:1", "--key", "/nonexistent/alice.key_secret"], "alice.key_secret"),
    (["unknown"], "invalid choice"),
    (["server", "--keys", "k"], "--bind"),
])
def test_misuse_exits_2_naming_the_culprit(argv, culprit, capsys):
    assert exit_code(argv) == 2
    assert culprit in capsys.readouterr().err


def test_a_public_key_is_not_a_pair(tmp_path, capsys):
    assert main(["keygen", str(tmp_path), "server", "alice"]) == 0
    assert main(["worker", "--server", "tcp://127.0.0.1:1", "--key", str(tmp_path / "alice.key")]) == 2
    assert "holds no secret key" in capsys.readouterr().err


def test_the_worker_blocks_ray_only_while_it_runs(tmp_path):
    import sys

    assert main(["keygen", str(tmp_path), "server", "alice"]) == 0
    had_ray = "ray" in sys.modules
    assert exit_code(["worker", "--server", "tcp://127.0.0.1:1", "--key", str(tmp_path / "alice.key")]) == 2
    assert ("ray" in sys.modules) == had_ray
    assert sys.modules.get("ray", True) is not None
