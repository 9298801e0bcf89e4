"""``falkirk.spark`` and ``falkirk.spark.pipeline`` import their public names on first use (falkirk.spark.lazy)."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = ["falkirk.spark", "falkirk.spark.pipeline"]


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_one_module_imports_no_more_than_it_needs() -> None:
    """The Spark settings and the CPU meter (what a benchmark's Structured Streaming driver takes from falkirk)
    import neither the solver, numpy, the pipeline's executor nor the lineage; a public name imports its module."""
    out = _run(
        "import sys\n"
        "from falkirk.spark.pipeline.run.session import SMALL_DATA, local_session\n"
        "from falkirk.spark.pipeline.run.cpu import TreeMeter\n"
        "heavy = ['numpy', 'falkirk.solver', 'falkirk.spark.pipeline.run.executor', 'falkirk.spark.lineage.graph']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "from falkirk.spark import Pipeline\n"
        "print(sorted(m for m in heavy[:3] if m in sys.modules))\n"
    )
    assert out.splitlines() == [
        "[]",
        "['falkirk.solver', 'falkirk.spark.pipeline.run.executor', 'numpy']",
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_its_defining_modules_object(package: str) -> None:
    module = importlib.import_module(package)
    exports = module.__dict__["_exports"]
    assert set(module.__all__) == set(exports), "__all__ and the lazy table disagree"
    for name, home in exports.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no attribute 'Nonesuch'"):
        module.Nonesuch  # noqa: B018


def test_star_import_and_a_name_spelt_as_a_subpackage() -> None:
    """``lineage`` is a function and a subpackage: the function wins whichever is imported first, as it did when
    the package imported it eagerly; ``from falkirk.spark import *`` binds every public name."""
    out = _run(
        "import falkirk.spark.lineage.model\n"
        "import falkirk.spark\n"
        "print(callable(falkirk.spark.lineage), type(falkirk.spark.lineage).__name__)\n"
        "from falkirk.spark import *\n"
        "print(sorted(set(falkirk.spark.__all__) - set(globals())))\n"
    )
    assert out.splitlines() == ["True function", "[]"]


def test_a_lazy_package_keeps_its_own_annotations() -> None:
    """The lazy package class adds no annotations of its own: the modules' annotations stay theirs."""
    import typing

    for package in PACKAGES:
        module = importlib.import_module(package)
        assert "_exports" not in module.__annotations__
        assert typing.get_type_hints(module) == {}


def test_an_attribute_error_while_importing_a_name_is_an_import_error(tmp_path: Path) -> None:
    """A module that raises ``AttributeError`` while it is imported lazily is reported as an ``ImportError``
    chained to it, not taken for a missing attribute."""
    pkg = tmp_path / "lazydemo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from falkirk.spark.lazy import lazy_exports\n"
        "lazy_exports(__name__, {'lazydemo.broken': ('Thing',), 'lazydemo.fine': ('Other',)})\n"
    )
    (pkg / "broken.py").write_text("import math\nmath.nonesuch\nThing = 1\n")
    (pkg / "fine.py").write_text("Other = 2\n")
    out = _run(
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import lazydemo\n"
        "print(lazydemo.Other)\n"
        "try:\n"
        "    from lazydemo import Thing\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, type(e.__cause__).__name__, 'nonesuch' in str(e))\n"
    )
    assert out.splitlines() == ["2", "ImportError AttributeError True"]


@pytest.mark.parametrize("package", PACKAGES)
def test_the_type_checkers_imports_are_the_lazy_table(package: str) -> None:
    """What mypy sees (the ``if TYPE_CHECKING:`` imports) is what runs (the lazy table): same names, same
    modules."""
    import ast

    module = importlib.import_module(package)
    assert module.__file__ is not None
    tree = ast.parse(open(module.__file__, encoding="utf-8").read())
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    seen = {
        alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert seen == module.__dict__["_exports"]
