"""A package's `__version__` is its pyproject.toml's version, and the installed distribution's:
cosmos-changefeed 1.0.0 said `__version__ == "0.1.0"` (round 19 found it from an installed
wheel). The literal stays (`importlib.metadata` would read files at every import); this holds
the two equal, and finds a stale install."""

from __future__ import annotations

import ast
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
    src = package / "src"
    return sorted(p / "__init__.py" for p in src.iterdir() if (p / "__init__.py").exists())


def written_versions(init: Path) -> list[str]:
    """The values `__version__` is given in ``init``."""
    tree = ast.parse(init.read_text("utf-8"))
    return [
        str(ast.literal_eval(node.value))
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
    ]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_a_packages_version_is_its_pyprojects_and_the_installed_ones(package: Path) -> None:
    name, written = declared(package)
    assert version(name) == written, (
        f"{name} is installed as {version(name)}, its pyproject.toml says {written}: "
        "install it again (make setup)"
    )
    for init in top_modules(package):
        assert set(written_versions(init)) <= {written}, (
            f"{init.relative_to(ROOT)}: __version__ {written_versions(init)}, "
            f"its pyproject.toml's {written}"
        )


def test_a_version_other_than_the_pyprojects_is_found(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text('__version__ = "0.1.0"\n')
    assert written_versions(init) == ["0.1.0"]
