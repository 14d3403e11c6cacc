"""The `make` commands the docs show, asked of make itself: a target it has no rule for, an option
it does not know (`make release-check --tag ...`, where the Makefile's variable is
`RELEASE_TAG=...`) is a doc bug a reader meets at once.

Each command found in a tracked Markdown file (an inline code span `` `make ...` ``, or a line of a
shell block starting with `make `; the CHANGELOGs, which tell what was, left out) runs as
`make --question` in the repository: make reads its options and targets and runs nothing,
exiting 2 on what it refuses (0 or 1: up to date or not). A `<placeholder>` value stands as `x`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.docblocks import shell_lines
from tools.release.dists import ROOT

#: An inline code span holding a make command (it may wrap across lines).
SPAN = re.compile(r"`(make(?:\s[^`]*)?)`")
#: Where a shell line's make command ends.
ENDS = re.compile(r"\s(?:&&|\|\||\||;|#)\s?")


@dataclass(frozen=True)
class MakeCommand:
    doc: str
    line: int
    text: str

    def arguments(self) -> list[str]:
        """Its arguments, a `<placeholder>` as `x`; an assignment's `<...>` value as `x`."""
        text = re.sub(r"<[^>]*>", "x", ENDS.split(" " + self.text, maxsplit=1)[0])
        return shlex.split(text)[1:]


def documented(root: Path = ROOT) -> list[MakeCommand]:
    """The make commands of every tracked Markdown file but the CHANGELOGs."""
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    found: list[MakeCommand] = []
    for name in listed:
        path = root / name
        if path.name == "CHANGELOG.md" or not path.is_file():
            continue
        text = path.read_text("utf-8")
        for match in SPAN.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(MakeCommand(name, line, " ".join(match[1].split())))
        found += [
            MakeCommand(name, s.line, s.text)
            for s in shell_lines(path, name)
            if s.text.startswith("make ") or s.text == "make"
        ]
    return found


def refusal(command: MakeCommand, root: Path = ROOT) -> str | None:
    """What make says when it refuses the command (None: it takes it)."""
    try:
        arguments = command.arguments()
    except ValueError as exc:  # unbalanced quotes
        return f"not a command line ({exc})"
    # a make of its own, not a sub-make of the one that may run us (make -jN's jobserver warning)
    outside = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    done = subprocess.run(
        ["make", "--question", "--no-print-directory", *arguments],
        cwd=root,
        env=outside,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 2:
        return None
    said = [line for line in done.stderr.splitlines() if line.startswith("make")]
    return (said or done.stderr.splitlines() or ["exit 2"])[0]


def refused(root: Path = ROOT) -> list[str]:
    """Each documented make command that make refuses, once per command, with where it is."""
    problems: list[str] = []
    seen: dict[str, str | None] = {}
    for command in documented(root):
        key = " ".join(command.arguments()) if "'" not in command.text else command.text
        if key not in seen:
            seen[key] = refusal(command, root)
        if seen[key] is not None:
            problems.append(f"{command.doc}:{command.line}: `{command.text}`: {seen[key]}")
    return problems
