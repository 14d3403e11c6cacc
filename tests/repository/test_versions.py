"""A distribution's version is written once, in its pyproject.toml: a package's `__version__` is
the installed distribution's (`importlib.metadata`), never a literal of its own. cosmos-changefeed
1.0.0 said `__version__ == "0.1.0"` (round 19 found it from an installed wheel); a literal
beside the pyproject's would drift again."""

from __future__ import annotations

import ast
import importlib
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())


def declared(package: Path) -> tuple[str, str]:
    """The distribution's name and version, as its pyproject.toml writes them."""
    project = tomllib.loads((package / "pyproject.toml").read_text("utf-8"))["project"]
    return project["name"], project["version"]


def top_modules(package: Path) -> list[Path]:
    return sorted(
        p / "__init__.py" for p in (package / "src").iterdir() if (p / "__init__.py").exists()
    )


def version_literals(init: Path) -> list[int]:
    """The lines where `__version__` is given a string literal."""
    tree = ast.parse(init.read_text("utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
        and isinstance(node.value, ast.Constant)
    ]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_a_packages_version_is_its_distributions(package: Path) -> None:
    name, written = declared(package)
    assert version(name) == written, (
        f"{name} is installed as {version(name)}, its pyproject.toml says {written}: "
        "install it again (make setup)"
    )
    for init in top_modules(package):
        assert version_literals(init) == [], f"{init.relative_to(ROOT)}: __version__ as a literal"
        module = importlib.import_module(init.parent.name)
        if hasattr(module, "__version__"):
            assert module.__version__ == written, init.parent.name


def test_a_version_literal_is_found(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text('__version__ = "0.1.0"\n')
    assert version_literals(init) == [1]
