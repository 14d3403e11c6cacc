"""Docs that run: every Python block of the READMEs a user reads first (this repository's, the
packages', the examples') is run and type-checked as a user would use it, in an empty folder
with the installed packages only.

The blocks are found by pytest-examples (`find_examples`). A block whose first line names a file
(`# orders/domain.py`) is that file (blocks naming the same file continue it); any other block
is a script of its own. Each README becomes one folder of such files, checked in a fresh
interpreter: its modules imported in order (a `FunctionApp` named `app` indexed, as the worker
indexes it), its scripts run; then its test files (`test_*.py`) run by pytest in another; and
everything checked by `mypy --strict`. A block fenced ```` ```python test="typecheck" ````
(one that needs a running stack) is only type-checked.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_examples import CodeExample

from funcstack.deadlines import LONG
from tools.docblocks import DRIVER, python_blocks, write_project

ROOT = Path(__file__).resolve().parents[2]
#: The guides of docs/ whose Python blocks run as the READMEs' do (the package README's long
#: material, moved there in 0.5: one topic a page).
GUIDES = (
    "quick-start",
    "your-own-app",
    "building-blocks",
    "scheduled-events",
    "subscribers",
    "operating-the-outbox",
    "upgrading",
    "testing",
)
#: The READMEs whose Python blocks must run: this repository's, the packages', the examples',
#: and the guides.
READMES = sorted(
    str(p.relative_to(ROOT))
    for p in (
        ROOT / "README.md",
        *ROOT.glob("packages/*/README.md"),
        *ROOT.glob("examples/*/README.md"),
        *(ROOT / "docs" / f"{guide}.md" for guide in GUIDES),
    )
)
MYPY_CONFIG = """[mypy]
strict = True
allow_untyped_calls = True
plugins = pydantic.mypy
explicit_package_bases = True
"""


def blocks(doc: str) -> list[CodeExample]:
    return python_blocks(ROOT / doc)


DOCS = [doc for doc in READMES if blocks(doc)]


def test_the_readmes_with_python_are_found() -> None:
    assert {"README.md", "packages/cosmos-outbox/README.md"} <= set(DOCS), DOCS


@pytest.mark.parametrize("doc", DOCS)
def test_every_python_block_of_the_readme_runs_and_type_checks(
    doc: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    steps = list(write_project(doc, folder, blocks(doc)))
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONDONTWRITEBYTECODE": "1",
        # The document's tests with pytest's own plugins only, as its install lines give a
        # reader (`pip install ... pytest`), not the dozen this venv holds for the repository's
        # suites (schemathesis, xdist, hypothesis', ...): loading those was 1 s of CPU a run.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    ran = subprocess.run(
        [sys.executable, "-c", DRIVER, str(folder), *steps],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=LONG,
    )
    assert ran.returncode == 0, f"{doc}: a block does not run\n{ran.stdout}\n{ran.stderr}"
    cache = tmp_path_factory.getbasetemp() / "docs-mypy-cache"
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(tmp_path / "mypy.ini"),
            "--cache-dir",
            str(cache),
            ".",
        ],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=LONG,
    )
    assert checked.returncode == 0, f"{doc}: a block does not type-check\n{checked.stdout}"


def test_a_block_naming_a_file_is_written_as_that_file(tmp_path: Path) -> None:
    """The harness itself: named blocks become files, unnamed ones scripts (so a README whose
    blocks the harness misreads fails above rather than passing unchecked)."""
    doc = "packages/cosmos-outbox/README.md"
    steps = list(write_project(doc, tmp_path, blocks(doc)))
    assert steps and all(s.split(":", 1)[0] in ("module", "script", "test") for s in steps)
    assert all(
        (
            tmp_path
            / (
                s.split(":", 1)[1]
                if not s.startswith("module:")
                else s[7:].replace(".", "/") + ".py"
            )
        ).exists()
        for s in steps
    )


def library_imports(source: str) -> list[tuple[str, str]]:
    """(module, name) of every `from cosmos_outbox... import name` in Python source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and (node.module.split(".")[0] == "cosmos_outbox")
        ):
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("doc", DOCS)
def test_what_a_readme_imports_of_the_library_is_public(doc: str) -> None:
    """Each name a README imports from cosmos-outbox is in its module's `__all__`, in a module
    whose path has no `_private` part."""
    for module, name in library_imports("\n".join(e.source for e in blocks(doc))):
        assert not any(p.startswith("_") for p in module.split(".")), (doc, module)
        public = importlib.import_module(module).__all__
        assert name in public, f"{doc} imports {name} from {module}, which does not list it"


EXAMPLE_APPS = sorted(p.parent for p in ROOT.glob("examples/*/function_app.py"))


@pytest.mark.parametrize("app", EXAMPLE_APPS, ids=lambda p: p.name)
def test_an_example_imports_only_the_root_and_the_test_kit(app: Path) -> None:
    """An example is written against the namespaces an app learns (README "The package's
    shape"): the outbox's (`cosmos_outbox`, its async twin `cosmos_outbox.aio`), the building
    blocks' (`cosmos_outbox.aggregates`, `cosmos_outbox.http`) and the test kit
    (`cosmos_outbox_testing`, its tests)."""
    allowed = {
        "cosmos_outbox",
        "cosmos_outbox.aio",
        "cosmos_outbox.aggregates",
        "cosmos_outbox.http",
        "cosmos_outbox_testing",
        "cosmos_outbox_testing.contracts",
    }
    for path in sorted(app.rglob("*.py")):
        if ".venv" in path.parts:
            continue
        for module, name in library_imports(path.read_text()):
            assert module in allowed, f"{path.relative_to(ROOT)} imports {name} from {module}"
            assert not name.startswith("_"), f"{path.relative_to(ROOT)} imports {name}"
