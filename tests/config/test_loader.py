"""The configuration layer: merge order, extend, -m edits, references, validation errors naming culprits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lamarckian.config import ConfigError, load
from lamarckian.config.checked import load_with_sources
from lamarckian.config.loader import CONFIG_DIR, DEFAULTS, read_yaml

REPOSITORY = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_defaults_load_and_resolve_references():
    config = load()
    assert config["evaluator"]["episodes"] == config["sample"]["eval"]  # ${sample.eval} keeps the int type
    assert config["root"].endswith("/model/lamarckian/pong")
    assert "~" not in config["root"]


def test_files_merge_in_order_dicts_merge_lists_replace(tmp_path):
    first = write(tmp_path / "a.yml", "train: {lr: 0.1, batch: 64}\nmodel: {hidden: [8, 8, 8]}\n")
    second = write(tmp_path / "b.yml", "train: {lr: 0.2}\nmodel: {hidden: [4]}\n")
    config = load([first, second])
    assert config["train"]["lr"] == 0.2
    assert config["train"]["batch"] == 64
    assert config["model"]["hidden"] == [4]


def test_extend_is_relative_to_the_extending_file(tmp_path):
    write(tmp_path / "base" / "parent.yml", "train: {lr: 0.5, batch: 32}\n")
    child = write(tmp_path / "base" / "sub" / "child.yml", "extend: ../parent.yml\ntrain: {batch: 16}\n")
    config = load([child])
    assert config["train"] == {**config["train"], "lr": 0.5, "batch": 16}


def test_duplicate_key_is_an_error(tmp_path):
    bad = write(tmp_path / "dup.yml", "train:\n  lr: 0.1\n  lr: 0.2\n")
    with pytest.raises(ConfigError, match=r"dup.yml: not valid YAML: .*duplicate key 'lr'"):
        load([bad])


def test_extend_cycle_is_an_error(tmp_path):
    write(tmp_path / "x.yml", "extend: y.yml\n")
    write(tmp_path / "y.yml", "extend: x.yml\n")
    with pytest.raises(ConfigError, match="extend cycle"):
        load([str(tmp_path / "x.yml")])


def test_paths_fall_back_to_the_config_folder():
    config = load(["mdp/gym.yml", "mdp/gym/pendulum.yml", "rl/ppo.yml"])
    assert config["mdp"]["create"] == "gym"
    assert config["mdp"]["gym"]["id"] == "Pendulum-v1"
    assert config["root"].endswith("gym/Pendulum-v1")


def test_modifications_are_yaml_and_empty_deletes():
    config = load([], ["train.lr=1e-3", "model.hidden=[32,16]", "evaluator.terminate=self.cost>100000000",
                       "mdp.gym.kwargs.render_mode=rgb_array", "mdp.gym.kwargs.frameskip=4",
                       "mdp.gym.kwargs.frameskip="])
    assert config["train"]["lr"] == pytest.approx(1e-3)
    assert isinstance(config["train"]["lr"], float)
    assert config["model"]["hidden"] == [32, 16]
    assert config["evaluator"]["terminate"] == "self.cost>100000000"
    assert config["mdp"]["gym"]["kwargs"] == {"render_mode": "rgb_array"}  # an open mapping takes any key
    assert "frameskip" not in config["mdp"]["gym"]["kwargs"]


def test_a_typed_key_cannot_be_deleted():
    with pytest.raises(ConfigError, match="ray: missing key"):
        load([], ["ray.address="])


def test_reference_embedded_and_cycle(tmp_path):
    config = load([], ["root=/tmp/${mdp.create}-${seed}"])
    assert config["root"] == "/tmp/pong-0"
    with pytest.raises(ConfigError, match="reference cycle"):
        load([], ["root=${root}"])
    with pytest.raises(ConfigError, match="refers to no key"):
        load([], ["root=${no.such}"])


def test_unknown_key_names_the_file_and_suggests(tmp_path):
    bad = write(tmp_path / "bad.yml", "train:\n  lrr: 0.1\n")
    with pytest.raises(ConfigError) as error:
        load([bad])
    message = str(error.value)
    assert "train.lrr" in message
    assert str(tmp_path / "bad.yml") in message
    assert "did you mean train.lr" in message


def test_wrong_type_names_key_and_file(tmp_path):
    bad = write(tmp_path / "bad.yml", "sample: {envs: lots}\n")
    with pytest.raises(ConfigError, match=r"sample.envs \(from .*bad.yml\): expected int"):
        load([bad])
    with pytest.raises(ConfigError, match="expected bool"):
        load([], ["rl.swap=1"])


def test_bad_expression_fails_at_load_naming_the_key():
    with pytest.raises(ConfigError, match="evaluator.terminate .*bad expression"):
        load([], ["evaluator.terminate=self.__class__"])


def test_ranges_only_when_allowed():
    with pytest.raises(ConfigError, match="train.lr"):
        load([], ["train.lr=[0,0.01]"])
    assert load([], ["train.lr=[0,0.01]"], ranges=True)["train"]["lr"] == [0, 0.01]


def test_every_shipped_config_file_loads():
    folder = CONFIG_DIR
    files = sorted(folder.rglob("*.yml"))
    assert len(files) >= 6
    for path in files:
        load([str(path)], ranges=path.parts[-3:-1] == ("mdp", "pong") or "ec" in path.parts)  # evolve.py's files
    assert read_yaml(DEFAULTS)["evaluator"]["terminate"]  # the default job stops by itself


def test_docs_list_every_key():
    from lamarckian.config.reference import entries, markdown

    reference = (REPOSITORY / "docs" / "config.md").read_text()
    assert markdown() in reference, "the key table is stale: run `python -m lamarckian.config.reference docs/config.md`"
    assert len(entries()) > 80


def test_ci_runs_the_readme_test_command():
    readme = (REPOSITORY / "README.md").read_text()
    command = (REPOSITORY / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert command in readme
    assert "pytest" in command


def test_some_keys_take_one_value_per_device_type():
    config = load([], ["rl.ppo.minibatches={cpu: 4, cuda: 16}", "mdp.vec.num_envs=32"])
    assert config["rl"]["ppo"]["minibatches"] == {"cpu": 4, "cuda": 16}
    assert config["mdp"]["vec"]["num_envs"] == 32
    for change, message in (("train.lr={cpu: 0.1}", "train.lr"), ("rl.ppo.minibatches={gpu: 2}", "expected int"),
                            ("rl.ppo.minibatches={cpu: 2.5}", "expected int")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            load([], [change])


def test_local_mode_at_load_wins_over_the_files(tmp_path):
    (tmp_path / "remote.yml").write_text("ray:\n  local_mode: false\n")
    config = load([str(tmp_path / "remote.yml")], local_mode=True)
    assert config["ray"]["local_mode"] is True


def test_local_mode_at_load_is_not_a_setting_of_the_users():
    _, sources = load_with_sources(["mdp/vec/ant_sumo.yml"], local_mode=True)
    assert "ray.local_mode" not in sources.by_key


@pytest.mark.parametrize("top, package", [("lamarckian.yml", DEFAULTS), ("config", CONFIG_DIR)])
def test_a_checkouts_top_level_defaults_and_config_folder_are_the_packages_own(top, package):
    assert (REPOSITORY / top).resolve() == package.resolve()      # links: one copy, which the wheel carries


def test_a_file_named_under_the_top_level_config_folder_loads(monkeypatch):
    monkeypatch.chdir(REPOSITORY)
    assert load(["config/ec/ea/nsga_ii.yml"], [], ranges=True)["ec"]["algorithm"] == "nsga_ii"
