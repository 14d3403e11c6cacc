"""`python -m tools.release` (`make release-check`): build, check, serve, try. Exit 1 on any
problem, each named; the last line says what ran and how long it took.

Options: `--python 3.11` (repeatable: only those Pythons), `--build-only` (build and check, no
venvs), `--full` (pip itself on every Python, every distribution's own tests on every Python
it supports: `plan`), `--tag <name>-v<version>` (the release workflow: the tag must name a
distribution at its version, its CHANGELOG heading dated; implies `--full`), `--keep` (keep
the scratch folder and print it), `--doc README.md` (repeatable: only those documents' trials).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from tools.docblocks import install_lines
from tools.release import build, commands, index, installs, own_tests, requirements
from tools.release.background import CosmosAccount
from tools.release.dists import ROOT, Distribution, distributions
from tools.release.trial import GUIDES, OWN_TESTS, Outcome, Trial, command, machine_environment

DIST = ROOT / "dist"
#: The Python of the repository's venv: `make test` runs every distribution's tests on it from
#: the tree (test-suite, test-funcstack, test-operators, test-changefeed, test-sql).
TREE_PYTHON = "3.13"


#: The operating system's own Python of a version (Debian's and Ubuntu's), tried first.
SYSTEM_PYTHON = "/usr/bin/python{version}"


def interpreters(wanted: list[str]) -> dict[str, str]:
    """The Pythons found; each missing one named in a line. The operating system's own
    (`SYSTEM_PYTHON`) where it has one and its variable (PYTHON311, ...) is not set: the Python
    a stranger's `pip install` most often runs on, built optimised (Debian's 3.11 runs Python
    code in 16 % less CPU than pyenv's); else scripts/find-python's (its variable, `pythonX.Y`
    on the PATH, pyenv's)."""
    found = {}
    for version in wanted:
        variable = "PYTHON" if version == TREE_PYTHON else f"PYTHON{version.replace('.', '')}"
        system = SYSTEM_PYTHON.format(version=version)
        tries: list[dict[str, str]] = [{}]  # find-python's own order
        if variable not in os.environ and Path(system).exists():
            tries.insert(0, {variable: system})
        for given in tries:
            done = subprocess.run(
                [str(ROOT / "scripts" / "find-python"), version],
                capture_output=True,
                text=True,
                check=False,
                env=os.environ | given,
            )
            if done.returncode == 0:
                found[version] = done.stdout.strip()
                break
        else:
            print(f"release-check: no Python {version}, its trials skipped: {done.stderr.strip()}")
    if found:
        named = ", ".join(f"{version} {path}" for version, path in found.items())
        print(f"release-check: the trials' Pythons: {named}")
    return found


def build_and_check(dists: list[Distribution], scratch: Path, tag: str | None) -> list[str]:
    """dist/ built anew; what the checks found."""
    shutil.rmtree(DIST, ignore_errors=True)
    DIST.mkdir()
    problems = build.Problems()
    python = build.build_environment(dists, scratch)
    for dist in dists:
        build.build(dist, DIST, scratch / "build" / dist.name, python)
        build.compare_wheels(dist, DIST, scratch / "build" / dist.name, problems)
        build.check_sdist_files(dist, DIST, problems)
        build.check_metadata(dist, DIST, problems)
    build.check_changelogs(dists, problems, tag)
    build.run_tools(DIST, problems)
    requirements.check_between(dists, problems)
    requirements.check_docs(dists, problems)
    for refused in commands.refused():
        problems.add("make", refused)
    installs.check(dists, problems)
    own_tests.check(dists, problems)
    if tag is not None:
        named = [d for d in dists if tag == f"{d.name}-v{d.version}"]
        if not named:
            versions = ", ".join(f"{d.name}-v{d.version}" for d in dists)
            problems.add(tag, f"names no distribution at its version (they are {versions})")
    return problems.found


def plan(dists: list[Distribution], found: dict[str, str], url: str, *, full: bool) -> list[Trial]:
    """A trial per README and supported Python found, and per guide; the longest first.

    `full` (the release workflow): pip itself runs every document's lines, and each
    distribution's own tests run from its sdist on every Python it supports. Otherwise (`make
    test`, where CPU is what the run waits for): pip itself runs each package README's first
    line (`pip install <name>`, the line the issue promises a stranger), once, on the oldest
    Python its distribution supports (the test kit's and the operators' first lines are
    cosmos-outbox's README's too: pip runs them there), uv's pip interface every other line and
    the same lines on the other Pythons and in the guides; the own tests run on that oldest
    Python (3.11), in a trial of their own; on 3.13 `make test` runs them from the tree
    (test-suite, test-funcstack, test-operators, test-changefeed, test-sql): funcstack's, 3.13
    only, are collected from its sdist, in its README's venv; 3.12 tries every install and first
    example."""
    trials = []
    readmes = {d.name: str((d.folder / "README.md").relative_to(ROOT)) for d in dists}
    headlines = {command(install_lines(ROOT / r, r)[0].text) for r in readmes.values()}
    by_pip: set[str] = set()  # the lines pip itself runs in make test's trials
    for dist in dists:
        readme = readmes[dist.name]
        pythons = [p for p in dist.pythons if p in found]
        lines = {command(line.text) for line in install_lines(ROOT / readme, readme)}
        for python in pythons:
            oldest = python == pythons[0]
            pip = None if full else frozenset((lines & headlines) - by_pip if oldest else ())
            by_pip |= pip or set()
            trial = Trial(readme, python, found[python], url, DIST, pip=pip)
            if dist.name in OWN_TESTS and (full or oldest):
                if not full and python == TREE_PYTHON:  # collected, in the README's venv
                    trial = replace(trial, tests=(dist,), collect_only=True)
                else:
                    trials.append(replace(trial, tests=(dist,), lines=False))
            trials.append(trial)
    for guide, python in GUIDES.items():
        if python in found:
            trials.append(
                Trial(guide, python, found[python], url, DIST, pip=None if full else frozenset())
            )
    # The longest first: the sdists' tests (3.11's cosmos-outbox's the longest), then the rest.
    return sorted(trials, key=lambda t: (t.lines, t.python != "3.11"))


def trials_at_once() -> int:
    """How many trials run at once: RELEASE_CHECK_TRIALS (`make test` sets the machine's cores),
    else the cores this process may use, at most 3."""
    text = os.environ.get("RELEASE_CHECK_TRIALS", "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise SystemExit(f"RELEASE_CHECK_TRIALS={text!r}: not a positive whole number")
        return int(text)
    return max(1, min(3, len(os.sched_getaffinity(0))))


def children_cpu() -> float:
    """The CPU (user + system) of this process's children that have ended and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report(outcomes: list[Outcome]) -> bool:
    for outcome in sorted(outcomes, key=lambda o: (o.python, o.name)):
        state = "ok" if not outcome.failures else "FAILED"
        print(
            f"  {outcome.python}  {outcome.name}: {state} in {outcome.seconds:.0f} s "
            f"({outcome.cpu:.0f} s of CPU)"
        )
        for line in outcome.steps:
            print(f"      {line}")
        for failure in outcome.failures:
            print("      " + failure.replace("\n", "\n        "))
    return all(not o.failures for o in outcomes)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release")
    parser.add_argument("--python", action="append", dest="pythons")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--tag")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--doc", action="append", dest="docs")
    args = parser.parse_args()
    started = time.monotonic()
    dists = distributions()
    scratch = Path(tempfile.mkdtemp(prefix="release-check-"))
    try:
        problems = build_and_check(dists, scratch, args.tag)
        built = time.monotonic() - started
        print(
            f"release-check: {len(dists)} sdists and {len(dists)} wheels built and checked "
            f"into dist/ in {built:.0f} s ({children_cpu():.0f} s of CPU)"
        )
        if problems:
            print("release-check: FAILED\n  " + "\n  ".join(problems))
            return 1
        if args.build_only:
            return 0
        found = interpreters(args.pythons or ["3.11", "3.12", "3.13", "3.14"])
        index.write(dists, DIST, scratch / "index")
        # one Cosmos DB account for the first examples that need one, lent to a trial at a time
        account = CosmosAccount(scratch / "cosmos", machine_environment())
        try:
            with index.serving(scratch / "index") as url:
                trials = plan(dists, found, url, full=args.full or args.tag is not None)
                trials = [t for t in trials if not args.docs or t.doc in args.docs]
                with ThreadPoolExecutor(max_workers=trials_at_once()) as pool:
                    outcomes = list(pool.map(lambda t: t.run(scratch / "trials", account), trials))
        finally:
            account.stop()
        ok = report(outcomes)
        if account.lent_to:
            print(
                f"  funcstack's Cosmos DB endpoint, the first examples' account: lent to "
                f"{account.lent_to} trial{'s' if account.lent_to > 1 else ''}, one at a time "
                f"({account.cpu:.1f} s of CPU)"
            )
        counts = ", ".join(
            f"{p}: {sum(o.passed for o in outcomes if o.python == p)} tests" for p in sorted(found)
        )
        cpu = sum(o.cpu for o in outcomes) + account.cpu
        print(
            f"release-check: {'passed' if ok else 'FAILED'}: {len(outcomes)} trials ({counts}) "
            f"in {time.monotonic() - started:.0f} s; the trials' processes used {cpu:.0f} s of CPU"
        )
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"release-check: scratch kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
