"""The docs' code blocks as things that run: one reader of a README's or a guide's fenced blocks,
shared by the repository's test of its Python blocks (tests/repository/test_docs_run.py, in
.venv) and by the release check (tools/release, in clean venvs with the distributions installed
from the local index).

- Python blocks (```` ```python ````, found by pytest-examples): a block whose first line names a
  file (`# orders/domain.py`) is that file (blocks naming the same file continue it); any other
  block is a script of its own; a block fenced ```` ```python test="typecheck" ```` (one that
  needs a running stack or an Azure account) is only type-checked. A block fenced with one of
  `SERVICES` (```` ```python test="cosmos" ````) needs what it names, which only the release
  check gives it (tools/release/trial.py: a Cosmos DB endpoint, funcstack installed): it runs
  there and is type-checked everywhere. `write_project` writes them into a folder; `DRIVER`,
  run by the interpreter under test, imports the modules (indexing a `FunctionApp` named
  `app`, as the worker does), runs the scripts, then runs the test files (`test_*.py`) with
  pytest in an interpreter of their own.
- Shell blocks (```` ```bash ````, ```` ```sh ````, or a fence with no language): their lines
  (`shell_lines`), each run as written by the release check (a clean venv's installs, a guide's
  steps) or by the docs' test (tools/doclines.py), or shown and not run: an HTML comment on the
  line before the block's fence (which no reader sees, and no renderer minds) says where it
  runs, `<!-- run="stack" -->` (one of `tools.doclines.CONTEXTS`), or that it is only shown and
  why, `<!-- illustrative="a synopsis of the options" -->` (`ShellLine.run`,
  `ShellLine.illustrative`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_examples import CodeExample, find_examples

FILE_LINE = re.compile(r"#\s*(?P<path>[A-Za-z0-9_./-]+\.py)\b")
#: Checks one document's folder: imports its modules, indexes their apps, runs its scripts and
#: its tests. argv: the folder, then the modules and scripts in the document's order.
DRIVER = """
import importlib, runpy, sys
from pathlib import Path
folder = Path(sys.argv[1])
sys.path.insert(0, str(folder))
tests = []
for entry in sys.argv[2:]:
    kind, name = entry.split(":", 1)
    if kind == "test":
        tests.append(name)
    elif kind == "script":
        runpy.run_path(str(folder / name), run_name="__main__")
    else:
        app = getattr(importlib.import_module(name), "app", None)
        if type(app).__module__.startswith("azure.functions"):
            import azure.functions as func
            if isinstance(app, func.FunctionApp):
                assert app.get_functions(), f"{name}.app has no functions"
if tests:  # in an interpreter of their own: the apps above are indexed (the worker does it once)
    import subprocess
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "-p", "no:randomly", "--rootdir", str(folder), *tests],
                             cwd=folder, env={**__import__("os").environ,
                                              "PYTHONPATH": str(folder)}))
"""
#: What a block fenced ```` ```python test="<name>" ```` needs, which only the release check
#: gives: the environment variables its document tells a reader to set for it (the document
#: names each: tests/tooling/test_release_check.py). "cosmos": a Cosmos DB account's endpoint
#: and key, and the trust of its certificate (funcstack's local endpoint; an account's is
#: public); "funcstack": funcstack installed, as its document's install lines install it.
SERVICES: dict[str, tuple[str, ...]] = {
    "cosmos": ("COSMOS_ENDPOINT", "COSMOS_KEY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"),
    "funcstack": (),
}
#: The fences whose lines are shell commands.
SHELL_FENCES = ("bash", "sh", "shell", "")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")
#: A block's setting, in the HTML comment on the line before its fence: `<!-- run="stack" -->`.
FENCE_SETTING = re.compile(r'(?P<key>[A-Za-z_]+)="(?P<value>[^"]*)"')
COMMENT_LINE = re.compile(r"^\s*<!--(?P<text>.*)-->\s*$")


def python_blocks(doc: Path) -> list[CodeExample]:
    """The document's Python blocks, in order."""
    return [e for e in find_examples(doc) if e.prefix.split(" ", 1)[0] in ("py", "python")]


def needs(example: CodeExample) -> str | None:
    """The block's `test="..."` setting: "typecheck", one of SERVICES, or None (it runs)."""
    setting = example.prefix_settings().get("test")
    assert setting in (None, "typecheck", *SERVICES), (
        f'line {example.start_line}: test="{setting}" is none of typecheck, {", ".join(SERVICES)}'
    )
    return setting


def write_project(
    doc: str, folder: Path, examples: list[CodeExample], given: Collection[str] = ()
) -> Iterator[str]:
    """Write the blocks as files in `folder`; yield what the driver does with each (in order,
    once per file): `module:NAME`, `script:PATH` or `test:PATH`. A block that needs a service
    not `given` (or fenced test="typecheck") is written, not run."""
    seen: set[str] = set()
    for example in examples:
        first = example.source.splitlines()[0] if example.source else ""
        named = FILE_LINE.match(first)
        path = named["path"] if named else f"example_{example.start_line}.py"
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        for parent in target.relative_to(folder).parents:
            if parent != Path() and not (folder / parent / "__init__.py").exists():
                (folder / parent / "__init__.py").write_text("")
        with target.open("a", encoding="utf-8") as out:
            out.write(example.source)
        wanted = needs(example)
        if path in seen or (wanted is not None and wanted not in given):
            continue
        assert named or "def test_" not in example.source, (
            f"{doc}:{example.start_line}: a block of tests names no file: start it with "
            "`# tests/test_<name>.py` so that it runs as tests"
        )
        seen.add(path)
        if Path(path).name.startswith("test_"):
            yield f"test:{path}"
        elif not named:
            yield f"script:{path}"
        else:
            yield "module:" + path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


@dataclass(frozen=True)
class ShellLine:
    """One command line of a shell block, as the document shows it."""

    doc: str
    line: int
    heading: str
    text: str
    #: The line of the fence that opens its block.
    block: int = 0
    #: The settings the comment before its block gives (`run`, `illustrative`), as pairs.
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def run(self) -> str | None:
        """Where the docs' test runs it (`<!-- run="..." -->` before its block), if said."""
        return dict(self.settings).get("run")

    @property
    def illustrative(self) -> str | None:
        """Why it is shown and not run (`<!-- illustrative="..." -->`), if it is."""
        return dict(self.settings).get("illustrative")

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def block_settings(before: str) -> tuple[tuple[str, str], ...]:
    """The `key="value"` settings of the HTML comment `before` a block's fence (none if the
    line is not one)."""
    comment = COMMENT_LINE.match(before)
    if comment is None:
        return ()
    return tuple((m["key"], m["value"]) for m in FENCE_SETTING.finditer(comment["text"]))


def shell_lines(doc: Path, name: str) -> list[ShellLine]:
    """Every command line of the document's shell blocks (a line continued with `\\` joined to
    the next), with the heading of the section it is in and its block's settings."""
    found: list[ShellLine] = []
    heading, fence, pending, start, block = "", None, "", 0, 0
    settings: tuple[tuple[str, str], ...] = ()
    previous = ""
    for number, raw in enumerate(doc.read_text("utf-8").splitlines(), start=1):
        opened = FENCE.match(raw)
        before, previous = previous, raw
        if opened:
            fence = None if fence is not None else opened["info"].strip().split(" ", 1)[0]
            settings = block_settings(before) if fence is not None else ()
            block = number
            continue
        if fence is None:
            if raw.startswith("#"):
                heading = raw.lstrip("#").strip()
            continue
        if fence not in SHELL_FENCES:
            continue
        text = raw.strip()
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1].rstrip() + " "
            continue
        command, pending = (pending + text).strip(), ""
        if command and not command.startswith("#"):
            found.append(ShellLine(name, start, heading, command, block, settings))
    return found


#: What pytest (or the interpreter) says when a documented run is not what it promises: a
#: config option it ignores, a mark it does not know, a plugin's deprecation, runpy's warning.
COMPLAINTS = re.compile(
    r"PytestConfigWarning|PytestUnknownMarkWarning|PytestDeprecationWarning|RuntimeWarning|"
    r"Traceback \(most recent call last\)"
)
#: A line's comment that promises pytest's summary: `# 1 passed`.
PROMISE = re.compile(r"#\s*(?P<count>\d+) passed\s*$")
#: An HTTP status a line's comment promises: `# 304`.
STATUS_PROMISE = re.compile(r"#\s*(?P<status>[1-5]\d\d)\b")
STATUS_LINE = re.compile(r"^HTTP/[\d.]+ (?P<status>\d{3})", re.MULTILINE)


def broken_promise(text: str, out: str, err: str) -> str | None:
    """What a line's run does that the line (its comment) or a reader would not accept: a
    complaint of pytest's or a traceback, a pytest summary other than the one promised, an HTTP
    status other than the one promised (an error status where none is)."""
    complaint = COMPLAINTS.search(out + err)
    if complaint:
        return f"it printed {complaint[0]}"
    promised = PROMISE.search(text)
    if promised:
        summary = next(
            (line for line in reversed(out.splitlines()) if re.search(r"\d+ passed", line)), ""
        )
        expected, said = f"{promised['count']} passed", summary.strip(" =")
        if not said.startswith(expected) or "warning" in said or "," in said:
            return f"its comment promises `{expected}`, pytest said `{said}`"
    if text.lstrip().startswith("curl") and re.search(r"\s-[A-Za-z]*i", text.split("#", 1)[0]):
        statuses = [int(s) for s in STATUS_LINE.findall(out)]
        wanted = STATUS_PROMISE.search(text)
        if statuses and wanted and statuses[-1] != int(wanted["status"]):
            return f"its comment promises {wanted['status']}, it answered {statuses[-1]}"
        if statuses and not wanted and statuses[-1] >= 400:
            return f"it answered {statuses[-1]}"
    return None


def install_lines(doc: Path, name: str) -> list[ShellLine]:
    """The lines of the document's shell blocks under its "Install" heading."""
    return [s for s in shell_lines(doc, name) if s.heading == "Install"]


#: The paragraph before a JSON block that names the file it is starts with its name:
#: "`funcstack.json`, what the app needs ...".
JSON_NAME = re.compile(r"^`(?P<name>[\w.-]+\.json)`")


def json_files(doc: Path) -> dict[str, str]:
    """The document's JSON blocks that the paragraph before names as a file (it starts with the
    file's name in backticks): name -> text."""
    found: dict[str, str] = {}
    lines = doc.read_text("utf-8").splitlines()
    number = 0
    while number < len(lines):
        opened = FENCE.match(lines[number])
        if not opened:
            number += 1
            continue
        closing = next(i for i in range(number + 1, len(lines)) if FENCE.match(lines[i]))
        named = JSON_NAME.match(_paragraph_before(lines, number))
        if opened["info"].strip() == "json" and named:
            found[named["name"]] = "\n".join(lines[number + 1 : closing]) + "\n"
        number = closing + 1
    return found


def _paragraph_before(lines: list[str], number: int) -> str:
    """The first line of the paragraph that ends right before line `number`."""
    end = number - 1
    while end >= 0 and not lines[end].strip():
        end -= 1
    start = end
    while start > 0 and lines[start - 1].strip():
        start -= 1
    return lines[start] if start >= 0 else ""
