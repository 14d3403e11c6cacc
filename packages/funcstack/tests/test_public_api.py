"""funcstack's public names: each package's ``__all__`` resolves through its lazy exports
(funcstack/_lazy.py), ``dir()`` lists it, an unknown name is an AttributeError naming the
package, importing a package imports none of its modules until a name is used, and the README's
Python API names what the package exports."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from funcstack._lazy import lazy_exports

PACKAGES = ["funcstack", "funcstack.cosmos", "funcstack.servicebus", "funcstack.functions_host"]
README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_is_listed(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(
        AttributeError,
        match=rf"module '{re.escape(package)}' has no attribute "
        "'NoSuchName'",
    ):
        _ = module.NoSuchName


def test_importing_the_packages_imports_none_of_their_modules() -> None:
    code = (
        "import sys, funcstack, funcstack.cosmos, funcstack.servicebus, "
        "funcstack.functions_host; print(sorted(m for m in sys.modules if "
        "m.startswith('funcstack.') and m != 'funcstack._lazy' and m not in "
        f"{PACKAGES!r}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"
    used = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, funcstack; funcstack.load_config; "
            "print('funcstack.config' in sys.modules, "
            "'funcstack.stack' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert used == ["True", "False"]  # the name's module, and only it


def test_a_lazy_name_left_out_of_all_is_refused() -> None:
    with pytest.raises(ImportError, match="lazy names missing from __all__: Hidden"):
        lazy_exports("some.package", ["Shown"], {"Shown": "x", "Hidden": "y"})


def test_the_readme_names_every_public_name_of_the_package() -> None:
    text = README.read_text("utf-8")
    section = text[text.index("## Python API") :]
    section = section[: section.index("\n## ", 1)]
    named = set(re.findall(r"`([A-Za-z_][\w.]*)", section))
    import funcstack

    missing = [n for n in funcstack.__all__ if n != "__version__" and n not in named]
    assert missing == []
    for dotted in sorted(n for n in named if n.startswith("funcstack.") and n.count(".") >= 2):
        package, _, name = dotted.rpartition(".")
        assert hasattr(importlib.import_module(package), name), dotted


#: A source file over this holds more than one idea: split it into rooms (issue 46).
MAX_SOURCE_LINES = 700
SOURCE = Path(__file__).resolve().parents[1] / "src" / "funcstack"


def test_no_source_file_is_over_700_lines() -> None:
    files = [
        p for p in SOURCE.rglob("*") if p.suffix in {".py", ".js"} and "node_modules" not in p.parts
    ]
    assert len(files) > 50  # the package's sources were found
    long = {
        str(p.relative_to(SOURCE)): n
        for p in files
        if (n := len(p.read_text("utf-8").splitlines())) > MAX_SOURCE_LINES
    }
    assert not long, f"split these into rooms of one idea each: {long}"


def test_the_package_version_is_the_distributions() -> None:
    """The host's status reads funcstack's version from the installed distribution (a module of
    the package does not import the package above it): the two say the same."""
    from importlib import metadata

    import funcstack

    assert metadata.version("funcstack") == funcstack.__version__
