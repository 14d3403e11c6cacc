"""Every shell line of the docs, and where it runs as written: the plan the docs' test
(tests/repository/test_docs_run.py) runs and lists, line by line.

A line is run, in the context its block's fence names (`CONTEXTS`: ```` ```bash run="stack" ````),
by the docs' test; or it is run elsewhere, and the listing says where: by the release check
(tools/release/lines.py: a clean venv's installs, a guide's steps, a package's own tests), by
`make test` itself (`MAKE_RUNS`), or by the test that starts and stops a command that runs until
it is stopped (`LONG_RUNNING`); or its fence says it is only shown, and why
(```` ```bash illustrative="..." ````). A line that is none of these is a line nobody runs: the
docs' test fails naming it.

`python -m tools.doclines` prints the plan.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tools.docblocks import ShellLine, shell_lines

ROOT = Path(__file__).resolve().parents[1]
#: Where the docs' test runs a line, by the name its fence gives.
CONTEXTS = {
    "repo": "in the repository, from a shell that exported nothing, the venv's bin first on PATH",
    "stack": (
        "against the stack make run starts (tools.stack.Stack, the docs' test's own on free "
        "ports: its app's for 7071, its subscriber's for 7072, its settings file for "
        "local.settings.json), from a shell that exported nothing"
    ),
}
#: Commands that run until they are stopped, and where they are started and stopped instead.
LONG_RUNNING: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"^make run\b"),
        "runs until Ctrl-C: the docs' test starts the same stack (tools.stack.Stack) and runs "
        "this page's other lines on it; tests/tooling/test_make_run.py runs make run itself",
    ),
    (
        re.compile(r"^make tail\b"),
        "runs until Ctrl-C: it prints what reaches the topic as it arrives (tools/tail.py); no "
        "test runs it",
    ),
    (
        re.compile(r"^funcstack (run|up)\b"),
        "runs until Ctrl-C: packages/funcstack/tests/test_cli.py starts and stops it; the guides' "
        "funcstack run lines run in the release check",
    ),
    (
        re.compile(r"cosmos-outbox\b.*\brelay\b"),
        "runs until stopped: tests/tooling/test_cli_as_documented.py starts it with its "
        "--settings, waits for /ready and stops it",
    ),
    (
        re.compile(r"cosmos-outbox\b.*\bmcp\b"),
        "an MCP server on stdin and stdout: "
        "packages/cosmos-outbox-operators/tests/operators/test_mcp.py "
        "starts the installed command and talks to it",
    ),
)
#: `make` targets that are runs of their own, and who runs them.
MAKE_RUNS = {
    "test": "the run the docs' test is part of",
    "test-slow": "make test with every core kept busy (CI's slow-machine run)",
    "test-suite": "one of make test's jobs: make test runs it",
    "unit": (
        "the tests make test's jobs run (test-suite, test-operators, test-changefeed, test-sql, "
        "example-tests) that start no server; tests/repository/test_docs_run.py checks its "
        "recipe deselects every test marked integration or e2e and uses no funcstack exec"
    ),
    "release-check": "one of make test's jobs: make test runs it",
    "chaos": "the relay's long fault-injection runs: make chaos, on its own",
}


@dataclass(frozen=True)
class Planned:
    """A documented line and where it runs: `context` (run by the docs' test), else `elsewhere`
    (why the docs' test does not run it: who does, or why it is only shown)."""

    line: ShellLine
    context: str | None = None
    elsewhere: str | None = None


def documents(root: Path = ROOT) -> list[str]:
    """The Markdown a reader reads: docs/, the READMEs (the repository's, the packages', the
    examples')."""
    found = [
        *sorted(root.glob("docs/*.md")),
        root / "README.md",
        *sorted(root.glob("packages/*/README.md")),
        *sorted(root.glob("examples/*/README.md")),
    ]
    return [str(p.relative_to(root)) for p in found]


def _make_target(text: str) -> str | None:
    if not text.startswith("make"):
        return None
    words = shlex.split(text, comments=True)
    if words[:1] != ["make"]:
        return None
    targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    return targets[0] if targets else "help"


def plan(root: Path = ROOT) -> list[Planned]:
    """Every shell line of `documents()`, with where it runs."""
    from tools.release.lines import tried

    release = tried()
    by_text = {
        " ".join(s.text.split("#", 1)[0].split()): s.where
        for doc in documents(root)
        for s in shell_lines(root / doc, doc)
        if (doc, s.line) in release
    }
    planned = []
    for doc in documents(root):
        for line in shell_lines(root / doc, doc):
            planned.append(_planned(line, release, by_text))
    return planned


def _planned(
    line: ShellLine, release: Mapping[tuple[str, int], str], by_text: Mapping[str, str]
) -> Planned:
    if line.illustrative is not None:
        return Planned(line, elsewhere=f"illustrative: {line.illustrative}")
    if (line.doc, line.line) in release:
        return Planned(line, elsewhere=release[(line.doc, line.line)])
    same = by_text.get(" ".join(line.text.split("#", 1)[0].split()))
    if same is not None:
        return Planned(line, elsewhere=f"the same line as {same}, run by make release-check")
    for pattern, why in LONG_RUNNING:
        if pattern.search(line.text):
            return Planned(line, elsewhere=why)
    target = _make_target(line.text)
    if target in MAKE_RUNS:
        return Planned(line, elsewhere=f"make {target}: {MAKE_RUNS[target]}")
    if line.run is not None:
        assert line.run in CONTEXTS, f"{line.where}: run={line.run!r} is none of {list(CONTEXTS)}"
        return Planned(line, context=line.run)
    return Planned(line)


# -- running a line ----------------------------------------------------------------------------

#: Variables a shell that exported nothing lacks: the test run's own (pytest's, make's), the
#: app's settings, the trust funcstack gives its processes.
_NOT_EXPORTED = (
    "PYTEST",
    "MAKE",
    "MFLAGS",
    "COSMOS",
    "Cosmos",
    "SERVICEBUS",
    "OUTBOX",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "VIRTUAL_ENV",
    "HTTP_BOUND",
    "COV_",
)


def fresh_shell(root: Path = ROOT) -> dict[str, str]:
    """The environment of a terminal in the repository that exported nothing, its venv's bin
    first on PATH (a reader's `source .venv/bin/activate`)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_EXPORTED)}
    kept["PATH"] = f"{root / '.venv' / 'bin'}:{kept.get('PATH', '/usr/bin:/bin')}"
    return kept


#: An assignment line of a block (`API=http://...`): what later lines of the block use.
ASSIGNMENT = re.compile(r"^(?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>\S.*)$")
#: A placeholder a reader fills in: `<eventId>`, `<time before the loss>`.
PLACEHOLDER = re.compile(r"<(?P<name>[A-Za-z][A-Za-z ]*)>")


def block_assignments(line: ShellLine, root: Path = ROOT) -> list[ShellLine]:
    """The assignment lines before `line` in its block (run before it, in the same shell)."""
    return [
        s
        for s in shell_lines(root / line.doc, line.doc)
        if s.block == line.block and s.line < line.line and ASSIGNMENT.match(s.text)
    ]


@dataclass(frozen=True)
class Ran:
    """A line as run: its text after the substitutions, exit code and output, and the
    placeholders filled with a stand-in (a value the stack holds nothing for)."""

    text: str
    code: int
    out: str
    err: str
    stand_ins: tuple[str, ...] = ()


def run_line(
    text: str,
    env: Mapping[str, str],
    *,
    cwd: Path = ROOT,
    before: list[str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`text` by bash (pipefail), after the `before` lines, in `cwd`."""
    script = "\n".join([*(before or []), text])
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def main() -> int:
    planned = plan()
    width = max(len(p.line.where) for p in planned)
    for p in planned:
        how = f"run ({p.context})" if p.context else (p.elsewhere or "NOT RUN, NO REASON")
        print(f"{p.line.where:<{width}}  {p.line.text[:70]:<70}  {how}")
    unplanned = [p for p in planned if p.context is None and p.elsewhere is None]
    print(
        f"{len(planned)} lines: {sum(bool(p.context) for p in planned)} run by the docs' test, "
        f"{len(unplanned)} unplanned"
    )
    return 1 if unplanned else 0


def lines_of(planned: list[Planned], context: str) -> Iterator[Planned]:
    return (p for p in planned if p.context == context)


if __name__ == "__main__":
    sys.exit(main())
