"""The core a small wheel of its own (issue 65): cosmos-outbox imports neither of the
distributions on top of it (cosmos-outbox-operators, the ways in; cosmos-outbox-testing, the test
kit) but through the one module that names them for 0.5's deprecated paths; the ways in use the
core's public names only; the test kit uses them and a declared set of the core's internals,
each named here with why; the core's wheel carries no HTML, JavaScript, CSS, template or sign-in
code; no source file of a package is over 700 lines (funcstack's own cap, for every
package), no function of one over 80 (issue 74), and none names a tracker id where its reason
belongs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from funcstack.deadlines import LONG
from tests.repository import syntax

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "packages/cosmos-outbox/src/cosmos_outbox"
OPERATORS = ROOT / "packages/cosmos-outbox-operators/src/cosmos_outbox_operators"
TESTKIT = ROOT / "packages/cosmos-outbox-testing/src/cosmos_outbox_testing"
#: The distributions on top of the core, by import name.
ON_TOP = {"cosmos_outbox_operators", "cosmos_outbox_testing"}
#: The core's modules that name them, each for a path deprecated in 0.5 (removed in 0.6): the one
#: that reaches them at run time (`_moved`: `Outbox.function_app(operators=...)`,
#: `Outbox.operators_blueprint`), and the deprecated aliases whose names it resolves there.
ALLOWED_TO_NAME_THEM = {
    CORE / "_moved.py",
    CORE / "operators.py",
    CORE / "cli/__init__.py",
    CORE / "testing/__init__.py",
    CORE / "testing/contracts/__init__.py",
}
#: A string that is a module path of theirs (an `importlib.import_module` argument, a table of
#: moved names); a sentence that mentions one is not.
MODULE_PATH = re.compile(r"^cosmos_outbox_(?:operators|testing)(?:\.[A-Za-z_]\w*)*\.?$")
#: Sign-in code: App Service Authentication's principal (the whole header, not the
#: -idp / -id pair that scopes an Idempotency-Key per caller) and the platform's switch.
SIGN_IN = re.compile(r"x-ms-client-principal(?![-\w])|WEBSITE_AUTH_ENABLED", re.IGNORECASE)
#: The one core module that reads the platform's word that authentication is on: whether the
#: caller the platform names is believed, one rule for the console's sign-in and the route
#: helper's per-caller Idempotency-Key scope (issue 72 item 8); the claims, roles and session
#: stay with the console.
CALLER_TRUST = "cosmos_outbox/http/_callers.py"
#: The core's private names the test kit may import, each with why. None: the kit is on the
#: core's public names, as a kit of someone else's would be (its fakes implement the public
#: ports, its suites drive the outbox through `cosmos_outbox.aio.Outbox`, the stored forms are
#: `cosmos_outbox.documents`'). A new one fails here: make the name public in the core.
KIT_KNOWS: set[str] = set()
MAX_SOURCE_LINES = 700
SOURCE_SUFFIXES = {".py", ".js", ".html", ".css"}


def sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) of each absolute import in `path` (name None for `import module`), type-only
    and deferred ones included."""
    found: list[tuple[str, str | None]] = []
    for node in syntax.nodes(path):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def names_them(path: Path) -> list[str]:
    """What in `path` names a distribution on top of the core: an import of it, or a string that
    is its import name (an `importlib.import_module("cosmos_outbox_operators...")`)."""
    found = [m for m, _ in imports(path) if m.split(".")[0] in ON_TOP]
    found += [
        node.value
        for node in syntax.nodes(path)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and MODULE_PATH.match(node.value)
    ]
    return found


def private_core_names(path: Path) -> list[str]:
    """Each import in `path` of a private module or name of the core (a part after
    `cosmos_outbox` that starts with `_`)."""
    found = []
    for module, name in imports(path):
        parts = module.split(".")
        if parts[0] != "cosmos_outbox":
            continue
        dotted = module if name is None else f"{module}.{name}"
        if any(p.startswith("_") and not p.endswith("__") for p in dotted.split(".")[1:]):
            found.append(dotted)
    return found


def test_the_core_names_neither_the_ways_in_nor_the_test_kit() -> None:
    assert len(sources(CORE)) > 100
    found = {
        str(p.relative_to(ROOT)): named
        for p in sources(CORE)
        if p not in ALLOWED_TO_NAME_THEM and (named := names_them(p))
    }
    assert found == {}


def test_the_one_module_that_names_them_is_only_reached_by_the_deprecated_paths() -> None:
    """`_moved` is imported where a 0.5 deprecation needs it, and by nothing else."""
    users = {
        str(p.relative_to(CORE))
        for p in sources(CORE)
        if any(m == "cosmos_outbox._moved" for m, _ in imports(p))
    }
    assert users == {"_outbox.py", "_renamed.py"}
    # the aliases resolve their names there too (through `_renamed`), never by an import
    for alias in ALLOWED_TO_NAME_THEM - {CORE / "_moved.py"}:
        assert not [m for m, _ in imports(alias) if m.split(".")[0] in ON_TOP], alias


def test_the_ways_in_use_the_cores_public_names_only() -> None:
    assert len(sources(OPERATORS)) > 10
    found = {
        str(p.relative_to(ROOT)): n for p in sources(OPERATORS) if (n := private_core_names(p))
    }
    assert found == {}


def test_the_test_kit_uses_the_cores_public_names_and_the_internals_it_declares() -> None:
    assert len(sources(TESTKIT)) > 20
    undeclared = {
        str(p.relative_to(ROOT)): sorted(
            {n for n in private_core_names(p) if not any(_within(n, k) for k in KIT_KNOWS)}
        )
        for p in sources(TESTKIT)
    }
    assert {k: v for k, v in undeclared.items() if v} == {}


def _within(dotted: str, module: str) -> bool:
    return dotted == module or dotted.startswith(f"{module}.")


def test_a_private_import_or_a_name_of_a_distribution_on_top_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from cosmos_outbox._mapper import read_feed\nfrom cosmos_outbox.http import _routing\n"
        "from cosmos_outbox.operations import Operations\nimport importlib\n"
        "def f() -> None:\n    import cosmos_outbox_operators\n"
        "    importlib.import_module('cosmos_outbox_testing.contracts')\n"
    )
    assert private_core_names(module) == [
        "cosmos_outbox._mapper.read_feed",
        "cosmos_outbox.http._routing",
    ]
    assert names_them(module) == ["cosmos_outbox_operators", "cosmos_outbox_testing.contracts"]


@pytest.mark.parametrize(
    "package", sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "src").is_dir())
)
def test_no_source_file_of_a_package_is_over_700_lines(package: str) -> None:
    folder = ROOT / "packages" / package / "src"
    files = [
        p
        for p in folder.rglob("*")
        if p.suffix in SOURCE_SUFFIXES
        and not {"node_modules", "vendor", "__pycache__"} & set(p.parts)
        and p.is_file()
    ]
    assert files  # the package's sources were found
    long = {
        str(p.relative_to(folder)): n
        for p in files
        if (n := len(p.read_text("utf-8").splitlines())) > MAX_SOURCE_LINES
    }
    assert not long, f"split these into rooms of one idea each: {long}"


MAX_FUNCTION_LINES = 80


def long_functions(folder: Path, root: Path = ROOT) -> dict[str, int]:
    """`path:function` of each function over MAX_FUNCTION_LINES under `folder`, its lines."""
    found = {}
    for path in sources(folder):
        if "node_modules" in path.parts:
            continue
        for node in syntax.nodes(path):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                if (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(root)}:{node.name}"] = length
    return found


@pytest.mark.parametrize(
    "package", sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "src").is_dir())
)
def test_no_function_of_a_package_is_over_80_lines(package: str) -> None:
    long = long_functions(ROOT / "packages" / package / "src")
    assert not long, f"split these into functions of one step each: {long}"


def test_a_long_function_is_found(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def short() -> None:\n    pass\n\n\nasync def long() -> None:\n"
        + "    x = 1\n" * MAX_FUNCTION_LINES
    )
    assert long_functions(tmp_path, tmp_path) == {"m.py:long": MAX_FUNCTION_LINES + 1}


#: An issue ("issue 92", "issues #7"), a milestone ("M10") or a round ("round 9") named in a
#: package's source: a reader of the shipped code cannot look it up; the reason it stood for can.
TRACKER_ID = re.compile(r"\b[Ii]ssues?\s+#?\d+|\bM\d{1,2}\b|\b[Rr]ounds?\s+\d+")


def tracker_ids(folder: Path, root: Path = ROOT) -> list[str]:
    """`path:line` of each line under `folder` where a tracker id starts (source files only)."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        if {"node_modules", "vendor", "__pycache__"} & set(path.parts):
            continue
        text = path.read_text("utf-8")
        lines = sorted({text.count("\n", 0, m.start()) + 1 for m in TRACKER_ID.finditer(text)})
        found += [f"{path.relative_to(root)}:{line}" for line in lines]
    return found


@pytest.mark.parametrize(
    "package", sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "src").is_dir())
)
def test_no_source_of_a_package_names_a_tracker_id(package: str) -> None:
    folder = ROOT / "packages" / package / "src"
    found = tracker_ids(folder, folder)
    assert not found, f"say the reason the id stood for instead: {found}"


def test_a_tracker_id_is_found_and_a_milestone_only_as_a_word(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        '"""Refused (issue\n92): a name."""\n# round 9, M10\nm1 = "M100 or XM1"\n'
    )
    assert tracker_ids(tmp_path, tmp_path) == ["m.py:1", "m.py:3"]


@pytest.fixture(scope="module")
def core_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The core's wheel, built from its folder as `make wheels` and Azure's remote build do."""
    out = tmp_path_factory.mktemp("dist")
    pytest.importorskip("hatchling")
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)],
        cwd=ROOT / "packages/cosmos-outbox",
        check=True,
        capture_output=True,
        timeout=LONG,  # a build
    )
    [wheel] = out.glob("cosmos_outbox-*.whl")
    return wheel


def test_the_cores_wheel_carries_no_page_script_template_or_sign_in(core_wheel: Path) -> None:
    with zipfile.ZipFile(core_wheel) as wheel:
        names = wheel.namelist()
        texts = {n: wheel.read(n).decode("utf-8", "replace") for n in names if n.endswith(".py")}
    assert any(n == "cosmos_outbox/operations/__init__.py" for n in names)
    assert [n for n in names if Path(n).suffix in {".html", ".js", ".css", ".jinja", ".j2"}] == []
    assert [n for n in names if "/templates/" in n or "/static/" in n or "_console" in n] == []
    # sign-in: App Service Authentication's principal header is read nowhere in the core
    assert [n for n, text in texts.items() if SIGN_IN.search(text) and n != CALLER_TRUST] == []
    principal_header = re.compile(r"x-ms-client-principal(?![-\w])", re.IGNORECASE)
    assert not principal_header.search(texts[CALLER_TRUST])
    # and nothing in it imports the ways in or the test kit but the one listed module
    assert [
        n
        for n, text in texts.items()
        if any(f"import {top}" in text or f"from {top}" in text for top in ON_TOP)
    ] == []
