"""No class of the package over 25 instance attributes, counted from the source by ``tools/class_sizes.py`` (a
class's attributes include its package bases', except those stored only by methods it overrides)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("class_sizes", ROOT / "tools" / "class_sizes.py")
class_sizes = sys.modules["class_sizes"] = importlib.util.module_from_spec(_spec)   # its dataclasses look it up
_spec.loader.exec_module(class_sizes)


def _package(tmp_path: Path, source: str) -> Path:
    package = tmp_path / "package"
    package.mkdir()
    (package / "module.py").write_text(textwrap.dedent(source))
    return package


def _counts(package: Path) -> dict[str, int]:
    return {where.split()[-1]: count for count, where in class_sizes.sizes(package)}


def test_no_class_of_the_package_is_over_the_limit():
    over = [f"{where}: {count}" for count, where in class_sizes.sizes(ROOT / "lamarckian") if count > class_sizes.LIMIT]
    assert over == []


def test_a_class_over_the_limit_fails_the_tool(tmp_path, capsys):
    stores = "\n".join(f"        self.a{i} = {i}" for i in range(26))
    package = _package(tmp_path, f"class Big:\n    def __init__(self):\n{stores}\n")
    assert class_sizes.main([str(package)]) == 1


def test_tuple_stores_annotations_and_augmented_stores_count(tmp_path):
    package = _package(tmp_path, """
        class Small:
            declared: int

            def __init__(self):
                self.a, (self.b, self.c) = 1, (2, 3)
                self.d: int = 4
                self.e += 1
                other = self
                other.f = 5
    """)
    assert _counts(package)["Small"] == 6      # declared, a, b, c, d, e (not other.f)


def test_bases_count_except_the_stores_of_overridden_methods(tmp_path):
    package = _package(tmp_path, """
        class Base:
            def __init__(self):
                self.kept = 1
                self.build()

            def build(self):
                self.replaced = 2

        class Child(Base):
            def build(self):
                self.own = 3
    """)
    assert _counts(package)["Child"] == 2      # kept, own
