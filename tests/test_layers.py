"""The package's architecture as a test: every import of every module (in functions too, not under
``TYPE_CHECKING``) goes from a higher layer to a lower one, and no modules import each other in a cycle. The layer
order is written once, here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lamarckian"

# lowest first; a part may import only the parts of lower layers (never its own layer's, never a higher one's)
LAYERS = (
    ("lazy", "extras", "errors", "record", "timeline", "registry", "said"),   # no imports of the package
    ("config", "entry"),                            # defaults, files, edits, typed sections; the programs' start
    ("cli", "rpc", "model"),                        # process set-up; the RPC layer; the networks
    ("util", "mdp"),                                # the original Lamarckian's import paths; environments
    ("games",),                                     # games served over the network (reached by mdp's factory by name)
    ("rating",),                                    # episode results, Elo, tournaments, matches on vectorized tasks
    ("rl",),                                        # actors, algorithms, learners, self-play
    ("remote",),                                    # workers over the internet (run rl's Actor), the relay
    ("ec",),                                        # populations of learners
    ("train", "evaluate", "export", "evolve"),      # the command lines
)
LAYER_OF = {part: number for number, parts in enumerate(LAYERS) for part in parts}
# inside rl/, lowest first, the same rule: the algorithms know how a network acts and learns, not who runs them
RL_LAYERS = (
    ("acting", "distributed", "evaluator", "policies", "seeds", "segment", "selfplay"),   # what the algorithms use
    ("algorithms", "loop"),                                                               # updates; the run loop
    ("fleet", "ondevice"),                                                                # the back ends that run them
)
RL_LAYER_OF = {part: number for number, parts in enumerate(RL_LAYERS) for part in parts}


def module_names() -> dict[str, Path]:
    """``lamarckian.a.b`` → its file, for every module of the package."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


class Imports(ast.NodeVisitor):
    """The package's modules one module imports."""

    def __init__(self, module: str, is_package: bool, modules: dict[str, Path]) -> None:
        self.module, self.is_package, self.modules, self.found = module, is_package, modules, set()

    def resolve(self, name: str) -> str | None:
        while name and name not in self.modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
                (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "lamarckian" and (target := self.resolve(alias.name)):
                self.found.add(target)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        if base.split(".")[0] != "lamarckian":
            return
        for alias in node.names:
            target = self.resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in self.modules else \
                self.resolve(base)
            if target:
                self.found.add(target)


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    graph = {}
    for module, path in modules.items():
        visitor = Imports(module, path.name == "__init__.py", modules)
        visitor.visit(ast.parse(path.read_text()))
        graph[module] = {target for target in visitor.found if target != module and
                         not module.startswith(target + ".")}          # a package's own __init__ is no import
    return graph


def part(module: str) -> str:
    """The first-level part of the package a module belongs to (``lamarckian.rl.fleet.actor`` → ``rl``)."""
    return module.split(".")[1] if module.count(".") else "__init__"


def rl_part(module: str) -> str:
    """The part of rl/ a module belongs to (``lamarckian.rl.fleet.actor`` → ``fleet``)."""
    return module.split(".")[2] if module.count(".") >= 2 else "__init__"


def upward_rl_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports between parts of rl/ that do not go down :data:`RL_LAYERS`."""
    inside = {module: {t for t in targets if t.startswith("lamarckian.rl.")} for module, targets in graph.items()
              if module.startswith("lamarckian.rl.")}
    return sorted(f"{module} imports {target}" for module, targets in inside.items() for target in targets
                  if rl_part(module) in RL_LAYER_OF and rl_part(target) in RL_LAYER_OF
                  and rl_part(module) != rl_part(target)
                  and RL_LAYER_OF[rl_part(target)] >= RL_LAYER_OF[rl_part(module)])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_part_of_the_package_has_a_layer(graph):
    unplaced = sorted({part(module) for module in graph} - set(LAYER_OF) - {"__init__"})
    assert unplaced == [], f"add these to LAYERS: {unplaced}"


def test_imports_go_down_the_layers_only(graph):
    upward = sorted(f"{module} imports {target}" for module, targets in graph.items() for target in targets
                    if part(module) in LAYER_OF and part(target) in LAYER_OF and part(module) != part(target)
                    and LAYER_OF[part(target)] >= LAYER_OF[part(module)])
    assert upward == []


def test_no_modules_import_each_other_in_a_cycle(graph):
    assert cycles(graph) == []


def test_the_check_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_part_of_rl_has_a_layer(graph):
    parts = {rl_part(module) for module in graph if module.startswith("lamarckian.rl.")}
    assert sorted(parts - set(RL_LAYER_OF) - {"__init__"}) == []


def test_imports_inside_rl_go_down_its_layers(graph):
    assert upward_rl_imports(graph) == []


def test_the_check_sees_an_algorithm_that_imports_the_fleet(graph):
    broken = {**graph, "lamarckian.rl.algorithms.ppo": graph["lamarckian.rl.algorithms.ppo"] | {
        "lamarckian.rl.fleet.actor"}}
    assert upward_rl_imports(broken) == ["lamarckian.rl.algorithms.ppo imports lamarckian.rl.fleet.actor"]
