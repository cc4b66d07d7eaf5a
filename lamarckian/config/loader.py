"""Build a run's configuration: defaults, ``-c`` files (with ``extend:``), ``-m`` edits, ``${}`` references.

Every value remembers the file (or ``-m``) that set it, so an error names its culprit.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from .errors import ConfigError
from .expression import Expression, ExpressionError
from .kinds import apply_kind_sampling, apply_kind_untuned, drop_tuned_for_kind
from .tuned import TUNED, apply_tuned, check_tuned, section_name

PACKAGE = Path(__file__).resolve().parents[1]
DEFAULTS = PACKAGE / "lamarckian.yml"      # every key's default (package data: a wheel carries it)
CONFIG_DIR = PACKAGE / "configs"           # the bundled -c files (mdp/gym.yml, rl/ppo.yml, ec/ea/pbt.yml...)
USER_CONFIG_DIR = Path("config")           # a project's own -c files, under the working directory
EXPRESSION_TAG = "!expr"
_REFERENCE = re.compile(r"\$\{([^}]+)\}")
_MAX_EXTEND_DEPTH = 32


class ExpressionText(str):
    """A default written as ``!expr "..."``: the key holds a restricted expression (checked at start-up)."""


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.add_constructor(EXPRESSION_TAG, lambda loader, node: ExpressionText(loader.construct_scalar(node)))
# YAML 1.1 reads 1e-3 (no dot) as text; a config means the number
_Loader.add_implicit_resolver("tag:yaml.org,2002:float",
                              re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
                              list("-+0123456789."))


def read_yaml(path: Path) -> dict[str, Any]:
    """One YAML file as a mapping (an empty file is ``{}``); errors name the file."""
    try:
        with open(path, encoding="utf-8") as stream:
            data = yaml.load(stream, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass with one scalar tag
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {str(error).splitlines()[0]}") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, not {type(data).__name__}")
    return data


def resolve_file(name: str, base: Path | None = None) -> Path:
    """A config path: against ``base`` (the extending file's folder) or the working directory, then the working
    directory's ``config/``, then the configs bundled with the package."""
    candidates = [Path(name).expanduser()]
    if base is not None and not Path(name).is_absolute():
        candidates.insert(0, base / name)
    if not Path(name).is_absolute():
        candidates += [USER_CONFIG_DIR / name, CONFIG_DIR / name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    looked = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise ConfigError(f"config file not found: {name} (looked at {looked})")


class Sources:
    """Which file (or ``-m``) last set each dotted key."""

    def __init__(self) -> None:
        self.by_key: dict[str, str] = {}

    def record(self, data: Any, origin: str, prefix: str = "") -> None:
        if isinstance(data, dict):
            for key, value in data.items():
                self.record(value, origin, f"{prefix}{key}.")
        if prefix:
            self.by_key[prefix[:-1]] = origin

    def of(self, key: str) -> str:
        """The origin of ``key``: what set it, or the nearest parent that was set (or a child, when only a child
        was: ``-m a.b.c=1`` names the origin of ``a.b``)."""
        child = next((origin for name, origin in self.by_key.items() if name.startswith(f"{key}.")), None)
        if key not in self.by_key and child is not None:
            return child
        parts = key.split(".")
        for end in range(len(parts), 0, -1):
            origin = self.by_key.get(".".join(parts[:end]))
            if origin is not None:
                return origin
        return "lamarckian.yml"


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Deep merge in place: mappings merge key by key, anything else (lists included) replaces."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def load_file(path: Path, sources: Sources, chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A file merged over its ``extend:`` parents (paths relative to the file, then ``config/``)."""
    if path in chain or len(chain) > _MAX_EXTEND_DEPTH:
        raise ConfigError(f"{path}: extend cycle: {' -> '.join(str(p) for p in (*chain, path))}")
    data = read_yaml(path)
    parents = data.pop("extend", None) or []
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise ConfigError(f"{path}: extend must be a file name or a list of them")
    merged: dict[str, Any] = {}
    for parent in parents:
        merge(merged, load_file(resolve_file(parent, path.parent), sources, (*chain, path)))
    sources.record(data, str(path))
    return merge(merged, data)


def parse_modification(text: str) -> tuple[str, Any, bool]:
    """``key.path=value`` as (key, YAML-parsed value, delete?). An empty value deletes the key."""
    key, equals, value = text.partition("=")
    key = key.strip()
    if not equals or not key:
        raise ConfigError(f"-m {text!r}: expected key.path=value")
    if value.strip() == "":
        return key, None, True
    try:
        parsed = yaml.load(value, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError:
        parsed = value  # not YAML (for example an expression with ': '): keep the text
    return key, parsed, False


def apply_modification(config: dict[str, Any], key: str, value: Any, delete: bool) -> None:
    """Set (or delete) a dotted key, creating intermediate mappings."""
    *parents, leaf = key.split(".")
    node = config
    for index, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"-m {key}: {'.'.join(parents[:index + 1])} is a {type(child).__name__}, not a mapping")
        node = child
    if delete:
        node.pop(leaf, None)
    else:
        node[leaf] = value


def lookup(config: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted key; ``KeyError`` naming the missing part."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def resolve_references(config: dict[str, Any], sources: Sources) -> dict[str, Any]:
    """Replace ``${a.b}``: a whole-string reference keeps the target's type, an embedded one is text."""

    def resolve(value: Any, key: str, active: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            return {k: resolve(v, f"{key}.{k}" if key else k, active) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v, key, active) for v in value]
        if not isinstance(value, str) or "${" not in value:
            return value

        def target(name: str) -> Any:
            if name in active:
                raise ConfigError(f"{key} (from {sources.of(key)}): reference cycle {' -> '.join((*active, name))}")
            try:
                found = lookup(config, name)
            except KeyError:
                raise ConfigError(f"{key} (from {sources.of(key)}): ${{{name}}} refers to no key") from None
            return resolve(found, name, (*active, name))

        whole = _REFERENCE.fullmatch(value)
        if whole:
            return target(whole.group(1).strip())
        text = _REFERENCE.sub(lambda m: str(target(m.group(1).strip())), value)
        return ExpressionText(text) if isinstance(value, ExpressionText) else text

    return resolve(config, "", ())


DEVICE_TYPES = ("cpu", "cuda")
PER_DEVICE = ("mdp.vec.num_envs", "rl.ppo.minibatches")  # keys that may hold one value per device type


def _type_ok(default: Any, value: Any) -> bool:
    if default is None or value is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    return isinstance(value, type(default))


def _per_device_ok(path: str, default: Any, value: Any) -> bool:
    """For the keys that take one value per device type (``PER_DEVICE``): ``{cpu: 4, cuda: 16}`` where the default
    is one value, or one value where the default is per device type."""
    if path not in PER_DEVICE:
        return False
    if isinstance(value, dict) and not isinstance(default, dict):
        return bool(value) and set(value) <= set(DEVICE_TYPES) and all(_type_ok(default, v) for v in value.values())
    if isinstance(default, dict) and not isinstance(value, dict):
        return all(_type_ok(d, value) for d in default.values())
    return False


def validate(config: dict[str, Any], defaults: dict[str, Any], sources: Sources, *,
             ranges: bool = False, prefix: str = "") -> None:
    """Unknown keys (with a "did you mean"), wrong types and bad expressions raise :class:`ConfigError`.

    A mapping whose default is empty (``{}``) is open: any keys. With ``ranges``, a two-element list
    ``[lo, hi]`` is accepted where the default is a number (a search range for ``evolve.py``). The keys of
    ``PER_DEVICE`` take one value or one per device type.
    """
    for key, value in config.items():
        path = f"{prefix}{key}"
        if key not in defaults:
            close = difflib.get_close_matches(str(key), [str(k) for k in defaults], n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            raise ConfigError(f"unknown key {path} (from {sources.of(path)}){hint}")
        default = defaults[key]
        if isinstance(default, dict) and isinstance(value, dict):
            if default:
                validate(value, default, sources, ranges=ranges, prefix=f"{path}.")
            continue
        if isinstance(default, ExpressionText) and value is not None:
            if not isinstance(value, str):
                value = str(value)
            try:
                Expression(value)
            except ExpressionError as error:
                raise ConfigError(f"{path} (from {sources.of(path)}): bad expression: {error}") from None
            continue
        is_range = (ranges and isinstance(value, list) and len(value) == 2 and isinstance(default, (int, float))
                    and all(_type_ok(default, v) or _type_ok(1.0, v) for v in value))
        if not is_range and not _type_ok(default, value) and not _per_device_ok(path, default, value):
            expected = type(default).__name__
            raise ConfigError(f"{path} (from {sources.of(path)}): expected {expected}, got "
                              f"{type(value).__name__} {value!r}")


def _expressions_to_text(config: Any) -> Any:
    if isinstance(config, dict):
        return {k: _expressions_to_text(v) for k, v in config.items()}
    if isinstance(config, list):
        return [_expressions_to_text(v) for v in config]
    return str(config) if isinstance(config, ExpressionText) else config


def read_config(files: Iterable[str] = (), modifications: Iterable[str] = (), *, defaults: Path = DEFAULTS,
                ranges: bool = False) -> tuple[dict[str, Any], Sources]:
    """Defaults ← each ``-c`` file in order ← the task's ``tuned.<rl.algorithm>`` section ← the values that
    ``mdp.create``'s kind needs (:mod:`~lamarckian.config.kinds`: a game's sampling; an untuned single-agent task's
    sample-efficient values) ← each ``-m`` edit, then references; every key
    and type checked against the defaults, and which file (or ``-m``, or tuned section) set
    each key the user set. The typed sections' ranges are checked by :func:`lamarckian.config.checked.load`, which
    users call."""
    sources = Sources()
    schema = read_yaml(defaults)
    config = copy.deepcopy(schema)
    for name in files:
        merge(config, load_file(resolve_file(name), sources))
    edited: list[str] = []
    for text in modifications:
        key, value, delete = parse_modification(text)
        apply_modification(config, key, value, delete)
        sources.by_key[key] = f"-m {text}"
        edited.append(key)
    config = resolve_references(config, sources)
    checked_schema = resolve_references(schema, Sources())

    def set_by_edit(key: str) -> bool:
        return any(key == e or key.startswith(f"{e}.") or e.startswith(f"{key}.") for e in edited)

    check_tuned(config, sources.of, lambda section, prefix: validate(section, checked_schema, sources,
                                                                     ranges=ranges, prefix=prefix))
    try:
        algorithm = str(lookup(config, "rl.algorithm"))
    except KeyError:                                  # a schema without algorithms (tests' own defaults)
        algorithm = ""
    drop_tuned_for_kind(config, algorithm, sources.of)
    section = section_name(algorithm, (config.get("model") or {}).get("recurrent"))
    tuned = bool((config.get(TUNED) or {}).get(section))
    apply_tuned(config, algorithm, set_by_edit, sources.by_key.__setitem__, sources.of)
    apply_kind_untuned(config, section, tuned, lambda name: read_yaml(resolve_file(name)),
                       lambda key: key in sources.by_key or set_by_edit(key), sources.by_key.__setitem__)
    apply_kind_sampling(config, lambda name: read_yaml(resolve_file(name)), set_by_edit, sources.by_key.__setitem__,
                        sources.of)
    validate(config, checked_schema, sources, ranges=ranges)
    config = _expressions_to_text(config)
    config["root"] = os.path.expanduser(str(config.get("root") or ""))
    return config, sources


def refuse_ignored(config: dict[str, Any], sources: Sources, prefixes: Iterable[str], why: str) -> None:
    """ConfigError naming the first key under ``prefixes`` that a file or ``-m`` set (the defaults do not count):
    the chosen program would ignore it, ``why``."""
    for key, origin in sources.by_key.items():
        if any(key == prefix or key.startswith(f"{prefix}.") for prefix in prefixes):
            try:
                value = lookup(config, key)
                leaf = not isinstance(value, dict) or not any(k.startswith(f"{key}.") for k in sources.by_key)
            except KeyError:
                leaf = True
            if leaf:
                raise ConfigError(f"{key} (from {origin}) has no effect here: {why}")
