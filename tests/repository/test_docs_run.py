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

And every shell line of docs/ and the READMEs, as tools/doclines.py plans it: those whose block
says `<!-- run="repo" -->` or `<!-- run="stack" -->` are run here (the stack's against the stack
`make run` starts, `docs_stack`; tests/repository/doclines_stack.py fills in what a reader
would), listed at the end of the run; every other line is a skip naming where it runs (the
release check, make test, the test of a command that runs until stopped) or why it is only
shown; a line nobody runs fails `test_every_documented_shell_line_is_run_or_says_why_not`.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_examples import CodeExample

from funcstack.deadlines import LONG
from tests.repository import doclines_stack
from tools import doclines
from tools.docblocks import DRIVER, broken_promise, python_blocks, shell_lines, write_project

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


# -- the docs' shell lines (tools/doclines.py) --------------------------------------------------

PLANNED = doclines.plan()


def _id(planned: doclines.Planned) -> str:
    return planned.line.where


def test_every_documented_shell_line_is_run_or_says_why_not() -> None:
    """Every shell line of docs/ and the READMEs is run (here, or by the release check), or its
    fence says it is only shown and why; where a reason names a test file, the file is there."""
    unplanned = [p.line.where for p in PLANNED if p.context is None and p.elsewhere is None]
    assert not unplanned, (
        f'lines nobody runs: give their block\'s fence run="..." ({", ".join(doclines.CONTEXTS)})'
        f' or illustrative="why": {unplanned}'
    )
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for planned in PLANNED:
        for named in re.findall(r"tests/[\w/*.-]+\.py", planned.elsewhere or ""):
            assert any(fnmatch.fnmatch(f, f"*{named}") for f in tracked), (
                f"{planned.line.where}: its reason names {named}, which is not there"
            )
    assert {"repo", "stack"} <= {p.context for p in PLANNED}


@pytest.mark.parametrize("planned", [p for p in PLANNED if p.context is None], ids=_id)
def test_a_documented_line_run_elsewhere_says_where(planned: doclines.Planned) -> None:
    """The listing's skipped lines: pytest's summary (-ra) names each, with where it runs."""
    pytest.skip(f"{planned.line.where} `{planned.line.text[:60]}`: {planned.elsewhere}")


def _ran(request: pytest.FixtureRequest, planned: doclines.Planned, verdict: str) -> None:
    request.node.user_properties.append(("docs-line", f"{planned.line.where}: {verdict}"))


@pytest.mark.parametrize("planned", list(doclines.lines_of(PLANNED, "repo")), ids=_id)
def test_a_documented_line_runs_in_the_repository(
    planned: doclines.Planned, request: pytest.FixtureRequest
) -> None:
    done = doclines.run_line(planned.line.text, doclines.fresh_shell(), timeout=LONG)
    assert done.returncode == 0, f"{planned.line.where}: exit {done.returncode}\n{done.stderr}"
    broken = broken_promise(planned.line.text, done.stdout, done.stderr)
    assert broken is None, f"{planned.line.where}: {broken}\n{done.stdout[-3000:]}"
    _ran(request, planned, "exit 0")


@pytest.fixture(scope="module")
def docs_stack(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: Any, shared_servicebus: Any
) -> Iterator[doclines_stack.DocsStack]:
    """The stack make run starts (the app and the subscriber, make run's settings), on the run's
    shared endpoints, for the lines that name it."""
    from tools.stack import Ports, Stack

    with Stack(
        workdir=Path(tmp_path_factory.mktemp("docs-stack")),
        ports=Ports.free(),
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        with_subscriber=True,
    ) as stack:
        yield doclines_stack.DocsStack(stack)


@pytest.mark.integration
@pytest.mark.parametrize("planned", list(doclines.lines_of(PLANNED, "stack")), ids=_id)
def test_a_documented_line_runs_against_make_runs_stack(
    planned: doclines.Planned, docs_stack: doclines_stack.DocsStack, request: pytest.FixtureRequest
) -> None:
    """Run as written, but for what a reader puts in: the stack's ports for 7071 and 7072, its
    settings file for local.settings.json, and each `<placeholder>` a value of the stack's (a
    contact it made, its ETag, an event of it...), or a stand-in where the stack holds none (a
    dead letter's number, a failure group): then the command's answer is the operation's own
    404 or 409, one line."""
    ran = docs_stack.run(planned.line)
    verdict = doclines_stack.verdict(ran)
    assert verdict is not None, (
        f"{planned.line.where}: `{ran.text}`: exit {ran.code}\n{ran.out[-3000:]}\n{ran.err[-3000:]}"
    )
    _ran(request, planned, verdict)


@pytest.mark.integration
def test_make_runs_stack_warns_of_nothing_about_its_lease_container(
    docs_stack: doclines_stack.DocsStack,
) -> None:
    """Its relay's processor started on the lease container tools/funcstack.json declares: no
    warning that the initialisation lock would never expire (TTL off)."""
    log = docs_stack.stack.workdir / "runner.log"
    said = log.read_text("utf-8", "replace")
    assert "relay_events" in said, said[-2000:]
    assert "TTL off" not in said, [line for line in said.splitlines() if "TTL off" in line]


def test_make_unit_selects_no_test_that_starts_a_server() -> None:
    """`make unit` (docs/testing.md: "every test that starts no server"): each pytest its recipe
    runs deselects the tests marked integration or e2e (the markers of every test that starts a
    server), and it runs nothing through `funcstack exec` (the services for several runs)."""
    recipe = subprocess.run(
        ["make", "--dry-run", "--no-print-directory", "unit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=doclines.fresh_shell(),
    ).stdout
    runs = [line for line in recipe.splitlines() if "pytest" in line]
    assert len(runs) >= 4, recipe
    for line in runs:
        chosen = re.search(r'-m "([^"]+)"', line)
        assert chosen is not None, f"make unit runs every test, servers' too: {line}"
        assert "not integration" in chosen[1] or chosen[1] == "not e2e", line
        if "examples" not in line:
            assert "not integration" in chosen[1], line
    assert "funcstack exec" not in recipe and "example-tests" not in recipe, recipe


def test_every_make_help_line_names_a_target_make_has() -> None:
    said = subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=doclines.fresh_shell(),
    ).stdout.splitlines()
    targets = [line.split()[1] for line in said if line.startswith("make ")]
    assert len(targets) == len(said) and "unit" in targets, said
    for target in targets:
        known = subprocess.run(
            ["make", "--question", "--no-print-directory", target],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            env=doclines.fresh_shell(),
        )
        assert known.returncode != 2, f"make help names `make {target}`: {known.stderr}"


def test_a_documented_lines_promises_are_held(tmp_path: Path) -> None:
    """The harness itself: a run that prints pytest's complaint, another summary than the one
    its comment promises, or another HTTP status, is refused; the comment before a block says
    where it runs."""
    promise = "python -m pytest    # 1 passed"
    assert broken_promise(promise, "..\n1 passed in 0.41s\n", "") is None
    assert broken_promise(promise, "=== 1 passed in 1.59s ===\n", "") is None  # without -q
    assert broken_promise(promise, ".\n1 passed, 7 warnings in 0.41s\n", "") is not None
    config = "PytestConfigWarning: Unknown config option: timeout\n1 passed in 2s"
    assert broken_promise("python -m pytest", config, "") == "it printed PytestConfigWarning"
    assert broken_promise("curl -si $API/x  # 304", "HTTP/1.1 200 OK\r\n", "") is not None
    assert broken_promise("curl -si $API/x", "HTTP/1.1 404 Not Found\r\n", "") is not None
    assert broken_promise("curl -si $API/x", "HTTP/1.1 201 Created\r\n", "") is None
    doc = tmp_path / "guide.md"
    doc.write_text(
        '# Guide\n\n<!-- run="stack" -->\n```bash\ncurl -s $API\n```\n\n'
        '<!-- illustrative="a synopsis" -->\n```bash\ntool [--option]\n```\n\n```bash\nls\n```\n'
    )
    lines = shell_lines(doc, "guide.md")
    assert [(s.run, s.illustrative) for s in lines] == [
        ("stack", None),
        (None, "a synopsis"),
        (None, None),
    ]
