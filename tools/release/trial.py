"""The distributions tried as a stranger tries them: for each README (and each guide that installs
something), on each Python its distribution supports, a clean venv in an empty folder, with
pip seeing only the local index and PyPI behind it (no machine configuration, no path, no
clone), and in it:

1. the document's `pip install` lines, run verbatim by bash (a line that cannot run as written,
   a `<placeholder>` say, fails here: that is a doc bug);
2. its first example (the Python blocks of the section its first Python block is in), through
   the harness that runs the docs' blocks (tools/docblocks.py): modules imported, apps indexed,
   scripts run, test files run by pytest; a block that needs a Cosmos DB account on the check's
   one (background.py's `CosmosAccount`: one endpoint, lent empty to one trial at a time);
3. the distribution's own tests, from its sdist (`OWN_TESTS`): `pip install "<name>[<extra>]"`,
   the sdist unpacked, pytest in its folder.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_examples import CodeExample

from tools.docblocks import (
    COMPLAINTS,
    DRIVER,
    SERVICES,
    ShellLine,
    broken_promise,
    install_lines,
    json_files,
    needs,
    python_blocks,
    shell_lines,
    write_project,
)
from tools.release.background import Background, CosmosAccount
from tools.release.build import uv
from tools.release.dists import ROOT, Distribution
from tools.release.own_tests import own_tests

PYPI = "https://pypi.org/simple/"
#: The guides a user installs from (besides the READMEs), and the Python they are tried on: the
#: ones that run on funcstack on 3.13, the others on one the outbox supports.
GUIDES = {
    "README.md": "3.12",
    "docs/quick-start.md": "3.13",
    "docs/your-own-app.md": "3.13",
    # the consuming side: no funcstack, the outbox's oldest Python
    "docs/subscribers.md": "3.11",
}
#: What is left of the environment in a trial: what the machine needs (certificates, locale),
#: never a PIP_, UV_ or PYTHON variable or a venv of the caller's; and the file `make test`
#: counts the servers it starts in (FUNCSTACK_STARTS, funcstack.starts: a trial's funcstack too).
KEPT = re.compile(
    r"^(HOME|LANG|LC_\w+|TERM|TMPDIR|SSL_CERT_\w+|REQUESTS_CA_BUNDLE|USER|FUNCSTACK_STARTS)$"
)
#: The PATH of a trial's processes after its venv's bin (and of the check's Cosmos DB endpoint).
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def machine_environment() -> dict[str, str]:
    """What is left of this process's environment in a trial's (`KEPT`), and the system's PATH:
    the environment of what a trial runs in the background from the repository's venv."""
    kept = {k: v for k, v in os.environ.items() if KEPT.match(k)}
    return {**kept, "PATH": SYSTEM_PATH}


#: Each distribution's own tests from its sdist, as its README's "Tests" section runs them
#: (own_tests.py). The in-process ones (no server) run on every Python it supports;
#: cosmos-outbox's adapter suites on the oldest too. funcstack's tests nearly all start servers:
#: from the sdist its in-process ones run (the config, the CLI's parsing, the plugin's options,
#: the SQL and ranges) and the rest are collected (every module imports from the installed
#: wheel); the whole suite runs from the tree in `make test` (test-funcstack), on the same
#: source. cosmos-outbox-testing ships no tests: the core's tests/testing hold the kit, and run
#: here with it installed from the index.
OWN_TESTS = own_tests()
#: The example app's in-process tests, on the Pythons other than 3.13 (make test runs them on
#: 3.13: example-tests), in cosmos-outbox's trial.
EXAMPLE = ROOT / "examples" / "orders"


@dataclass
class Outcome:
    """What one trial did: each step, its result, and the tests counted."""

    name: str
    python: str
    steps: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    passed: int = 0
    seconds: float = 0.0
    #: the CPU (user + system) of its steps' processes
    cpu: float = 0.0

    def step(self, what: str, done: subprocess.CompletedProcess[str], cpu: float = 0.0) -> bool:
        """`done`'s result as a line (its CPU, and `cpu` more: what it waited on)."""
        cpu += getattr(done, "cpu", 0.0)
        self.cpu += cpu
        counted = re.search(r"(\d+) passed", done.stdout.splitlines()[-1] if done.stdout else "")
        if counted:
            self.passed += int(counted[1])
        if done.returncode == 0:
            passed = f"{counted[1]} passed, " if counted else ""
            self.steps.append(f"{what}: ok ({passed}{cpu:.1f} s of CPU)")
            return True
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-40:])
        self.failures.append(f"{what}: exit {done.returncode}\n{tail}")
        return False


@dataclass(frozen=True)
class Trial:
    """One document on one Python: its install lines, first example and own tests."""

    doc: str
    python: str
    interpreter: str
    index: str
    out: Path
    tests: tuple[Distribution, ...] = ()
    #: The document's lines run by pip itself (their commands: `command()`; None: every line);
    #: the others by uv's pip interface, standing in for pip on the PATH: the same lines, the
    #: same index, about a tenth of pip's CPU.
    pip: frozenset[str] | None = None
    #: Its install lines, first example and a guide's steps (else only the own tests, in a venv
    #: of their own: they then start at once, beside the lines' trial). With both, the own
    #: tests come after the lines, in their venv.
    lines: bool = True
    #: The own tests only collected (every module imports from the installed wheel): where
    #: `make test` runs them from the tree.
    collect_only: bool = False

    def environment(self, venv: Path, home: Path) -> dict[str, str]:
        return {
            **machine_environment(),
            "PATH": f"{venv / 'bin'}:{SYSTEM_PATH}",
            "VIRTUAL_ENV": str(venv),
            "HOME": os.environ.get("HOME", str(home)),
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_INDEX_URL": self.index,
            "PIP_EXTRA_INDEX_URL": PYPI,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            # pip compiles every module it installs (and ignores what fails to compile); the
            # trials' processes compile what they import, as after uv, which compiles nothing
            "PIP_COMPILE": "0",
            "UV": uv(),
            "UV_NO_CONFIG": "1",
            "UV_INDEX_URL": self.index,
            # PyPI as uv spells it (no final slash): uv then keeps what it builds from PyPI's
            # sdists (python-qpid-proton's wheel, 18 s of CPU) under PyPI's key, where .venv's
            # install left it, not under another index's
            "UV_EXTRA_INDEX_URL": PYPI.removesuffix("/"),
        }

    def run(self, scratch: Path, account: CosmosAccount) -> Outcome:
        """The trial, in a folder of its own under `scratch`; a first example that needs a
        Cosmos DB account runs on `account` (the check's, lent to one trial at a time)."""
        started = time.monotonic()
        outcome = Outcome(self.doc if self.lines else f"{self.doc} (own tests)", self.python)
        name = f"{self.python}-{self.doc.replace('/', '_').removesuffix('.md')}"
        folder = scratch / (name if self.lines else f"{name}-tests")
        folder.mkdir(parents=True)
        venv = folder / ".venv"
        # pip seeded only where pip itself runs a line (uv runs the others, and the own tests')
        seed = ["--seed"] if self.lines and (self.pip is None or self.pip) else []
        made = _run(
            [uv(), "venv", "--quiet", "--no-config", *seed, "-p", self.interpreter, str(venv)],
            folder,
            dict(os.environ),
        )
        made.check_returncode()
        outcome.step(f"uv venv{' --seed' if seed else ''} -p {self.python}", made)
        env = self.environment(venv, folder)
        if self.pip is not None:  # a pip standing in for pip, first on the PATH of uv's lines
            (folder / "by-uv").mkdir()
            (folder / "by-uv" / "pip").write_text(PIP_BY_UV)
            (folder / "by-uv" / "pip").chmod(0o755)
        if not self.lines:
            for dist in self.tests:
                self._own_tests(dist, folder, env, outcome)
        elif self._install(folder, env, outcome) and self._example(folder, env, outcome, account):
            if self.doc.startswith("docs/"):
                self._guide(folder / "example", env, outcome)
            for dist in self.tests:
                self._own_tests(dist, folder, env, outcome)
        outcome.seconds = time.monotonic() - started
        return outcome

    def _shell(self, line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return _run(["bash", "-euo", "pipefail", "-c", line], cwd, env)

    def _install(self, folder: Path, env: dict[str, str], outcome: Outcome) -> bool:
        lines = install_lines(ROOT / self.doc, self.doc)
        if not lines:
            outcome.failures.append(f"{self.doc} shows no `pip install` line")
            return False
        if self.doc.startswith("packages/"):  # then an extra a later section names
            lines += extra_installs(ROOT / self.doc, self.doc)
        for line in lines:
            by_pip = self.pip is None or command(line.text) in self.pip
            path = env["PATH"] if by_pip else f"{folder / 'by-uv'}:{env['PATH']}"
            done = self._shell(line.text, folder, env | {"PATH": path})
            if not outcome.step(
                f"{self.doc}:{line.line} `{line.text}`{'' if by_pip else ' (uv)'}", done
            ):
                return False
        return True

    def _guide(self, project: Path, env: dict[str, str], outcome: Outcome) -> None:
        _guide_steps(self, project, env, outcome)

    def _example(
        self, folder: Path, env: dict[str, str], outcome: Outcome, account: CosmosAccount
    ) -> bool:
        # A guide is one app, its tests included (every Python block, as test_docs_run runs it);
        # a README's first example is the section its first Python block is in.
        guide = self.doc.startswith("docs/")
        examples = python_blocks(ROOT / self.doc) if guide else first_example(ROOT / self.doc)
        project = folder / "example"
        project.mkdir()
        wanted = {needs(e) for e in examples} & set(SERVICES)
        # funcstack where the document's own lines installed it (its README, the guides)
        given = {"cosmos"} | ({"funcstack"} if (folder / ".venv/bin/funcstack").exists() else set())
        steps = list(write_project(self.doc, project, examples, given))
        if guide and any(
            command(s.text).startswith(PYTEST) for s in shell_lines(ROOT / self.doc, self.doc)
        ):
            # the guide says how to run its tests, and its steps run them so (_guide_steps)
            steps = [s for s in steps if not s.startswith("test:")]
        if not steps:
            outcome.steps.append("first example: type-checked only (it needs a running app)")
            return True
        python = str(folder / ".venv" / "bin" / "python")
        what = f"first example (line {examples[0].start_line})"
        if "cosmos" not in wanted:
            return outcome.step(
                what, _run([python, "-c", DRIVER, str(project), *steps], project, env)
            )
        try:
            with account.lent() as cosmos:
                done = _run([python, "-c", DRIVER, str(project), *steps], project, env | cosmos)
        except RuntimeError as exc:
            outcome.failures.append(f"{what}: {exc}")
            return False
        names = ", ".join(sorted(cosmos))
        return outcome.step(f"{what}, on the check's Cosmos DB account ({names})", done)

    def _own_tests(
        self, dist: Distribution, folder: Path, env: dict[str, str], outcome: Outcome
    ) -> None:
        spec = OWN_TESTS[dist.name]
        python = str(folder / ".venv" / "bin" / "python")
        extra = f"{dist.name}[{spec.extras}]"
        installed = _run(
            [uv(), "pip", "install", "--quiet", "--python", python, extra], folder, env
        )
        if not outcome.step(f"uv pip install {extra}", installed):
            return
        with tarfile.open(self.out / dist.sdist) as sdist:
            sdist.extractall(folder, filter="data")
        unpacked = folder / f"{dist.module}-{dist.version}"
        run_env = dict(env)
        funcstack = ROOT / ".venv" / "bin" / "funcstack"
        if spec.adapters_on == self.python and funcstack.exists():
            run_env["FUNCSTACK"] = str(funcstack)
        collect = ("--collect-only",)
        if self.collect_only or dist.name == "funcstack":  # every module imports from the wheel
            outcome.step(
                f"{dist.sdist}'s whole suite collected", _pytest(python, collect, unpacked, run_env)
            )
        if not self.collect_only:
            arguments = spec.arguments(self.python)
            done = _pytest(python, arguments, unpacked, run_env)
            what = f"{dist.sdist}'s tests ({' '.join(arguments)})"
            complaint = COMPLAINTS.search(done.stdout + done.stderr)
            if done.returncode == 0 and complaint is not None:  # an option ignored, a mark unknown
                outcome.failures.append(
                    f"{what}: pytest printed {complaint[0]}\n{done.stdout[-2000:]}"
                )
            else:
                outcome.step(what, done)
        if dist.name == "cosmos-outbox" and not self.collect_only:
            done = _pytest(python, ("-m", "not e2e"), EXAMPLE, run_env)
            outcome.step("examples/orders' in-process tests", done)


def extra_installs(doc: Path, name: str) -> list[ShellLine]:
    """A package README's `pip install` lines outside its "Install" and "Tests" sections (an
    extra a later section names: the operators' `[mcp]`), which its trial runs after its install
    lines, in the same venv."""
    return [
        s
        for s in shell_lines(doc, name)
        if s.heading not in ("Install", "Tests") and s.text.startswith("pip install ")
    ]


def _pytest(
    python: str, arguments: tuple[str, ...], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments], cwd, env)


class Ran(subprocess.CompletedProcess[str]):
    """A step's process as it ended, and the CPU it and the processes it waited for used."""

    cpu: float = 0.0


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> Ran:
    """A step of a trial: its output kept (shown when it fails), 20 minutes at most (then
    killed, with its process group), its CPU counted (`os.wait4`: user + system time of it and
    of every process it waited for)."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    output: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda n=name, f=stream: output.__setitem__(n, f.read()))
        for name, stream in (("out", process.stdout), ("err", process.stderr))
    ]
    for reader in readers:
        reader.start()
    timer = threading.Timer(STEP_SECONDS, lambda: os.killpg(process.pid, signal.SIGKILL))
    timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    finally:
        timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join()
    ran = Ran(command, process.returncode, output.get("out", ""), output.get("err", ""))
    ran.cpu = usage.ru_utime + usage.ru_stime
    return ran


#: The longest a step may take before it is killed.
STEP_SECONDS = 1200


#: How a guide's shell line runs its tests.
PYTEST = ("python -m pytest", "pytest")
#: `pip` for a line uv runs: `pip install ...` as `uv pip install ...` into the venv.
PIP_BY_UV = """#!/bin/sh
# The release check's stand-in for pip (tools/release/trial.py): uv's pip interface.
exec "$UV" pip "$@" --python "$VIRTUAL_ENV/bin/python"
"""


def _guide_steps(trial: Trial, project: Path, env: dict[str, str], outcome: Outcome) -> None:
    """A guide's shell lines after its install section, verbatim, in the app's folder (its
    files: the Python blocks, and the JSON blocks it names), in order. A `funcstack run` line
    runs in the background (as in a terminal of its own) with `--free-ports --json` added, since
    other stacks run on this machine's well-known ports; the lines after it see the app's port
    where they say 7071, and it is stopped (Ctrl-C: SIGINT) when they are done."""
    for name, text in json_files(ROOT / trial.doc).items():
        (project / name).write_text(text, "utf-8")
    lines = [s for s in shell_lines(ROOT / trial.doc, trial.doc) if s.heading != "Install"]
    stack: Background | None = None
    port = "7071"
    try:
        for line in lines:
            text = line.text.replace("127.0.0.1:7071", f"127.0.0.1:{port}")
            what = f"{trial.doc}:{line.line} `{line.text}`"
            if line.text.startswith("funcstack run"):
                command = f"{line.text.split('#', 1)[0].strip()} --free-ports --json"
                stack = Background(command, project, env)
                answer = stack.ready()
                if not answer.get("ready"):
                    outcome.failures.append(f"{what}: not ready: {answer}")
                    return
                outcome.steps.append(f"{what}: ready (--free-ports --json)")
                port = str(answer["ports"][project.name])
                continue
            done = trial._shell(text, project, env)
            broken = (
                broken_promise(line.text, done.stdout, done.stderr)
                if done.returncode == 0
                else None
            )
            if broken is not None:
                outcome.failures.append(f"{what}: {broken}\n{done.stdout[-2000:]}")
                return
            if not outcome.step(what, done):
                return
    finally:
        if stack is not None:
            killed = stack.stop()
            outcome.cpu += stack.cpu
            outcome.steps.append(f"funcstack run stopped ({stack.cpu:.1f} s of CPU)")
            if killed:
                outcome.failures.append(f"funcstack run {killed}")
            outcome.failures += [
                f"{trial.doc}: its app warned on its first run: {line}"
                for line in warnings(project / ".funcstack" / f"{project.name}.log")
            ]


#: A warning in an app's log (its own, the outbox's, the host's), as funcstack writes it, or as
#: Python prints one (`RuntimeWarning: ...`).
WARNING = re.compile(r"\bWARNING\b|\w+Warning: ")


def warnings(log: Path) -> list[str]:
    """The warnings of an app's log: a guide's files, as written, warn of nothing (a lease
    container without time to live, a subscription without the targeted-delivery rule)."""
    if not log.exists():
        return []
    lines = log.read_text("utf-8", "replace").splitlines()
    return [line.strip()[:300] for line in lines if WARNING.search(line)]


def command(line: str) -> str:
    """A shell line without its comment and extra spaces."""
    return " ".join(line.split("#", 1)[0].split())


def first_example(doc: Path) -> list[CodeExample]:
    """The Python blocks of the section (a `##` heading) the document's first Python block is in."""
    blocks = python_blocks(doc)
    if not blocks:
        return []
    headings = [
        number
        for number, line in enumerate(doc.read_text("utf-8").splitlines(), start=1)
        if line.startswith("## ")
    ]

    def section(line: int) -> int:
        return max((h for h in headings if h < line), default=0)

    first = section(blocks[0].start_line)
    return [b for b in blocks if section(b.start_line) == first]
