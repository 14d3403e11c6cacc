"""The Pythons of a document's install lines: a line that installs (or runs) one of ours works on
the Pythons its `requires-python` allows, and a reader runs a block's lines together. So the check
refuses, in the documents the trials try (each README, each guide):

- a block whose lines need different Pythons (`pip install funcstack`, 3.13 only, beside `pip
  install cosmos-outbox`, 3.11 on): the narrower line goes in a block of its own;
- a block that needs fewer Pythons than the document's other install blocks without the
  paragraph before it naming the oldest (`... in a venv of Python 3.13:`);
- a line the document is tried on a Python it does not install on (a README's block on one of
  its distribution's Pythons, a guide's on its trial's).

A line installs what its `pip install` names (a requirement, an extra's brackets aside; options
and files skipped), or runs a command one of ours declares (`funcstack setup`).
"""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from tools.docblocks import ShellLine, install_lines
from tools.release.build import Problems
from tools.release.dists import PYTHONS, ROOT, Distribution, normalise


def supported(dist: Distribution) -> frozenset[str]:
    """The Pythons (of `PYTHONS`) its `requires-python` allows: what pip installs it on."""
    allowed = SpecifierSet(dist.requires_python)
    return frozenset(p for p in PYTHONS if allowed.contains(f"{p}.0"))


def commands(dists: list[Distribution]) -> dict[str, Distribution]:
    """The command names our distributions declare (`[project.scripts]`), to their distribution."""
    found = {}
    for dist in dists:
        project = tomllib.loads((dist.folder / "pyproject.toml").read_text("utf-8"))["project"]
        for name in project.get("scripts", {}):
            found[name] = dist
    return found


def needs(line: str, dists: list[Distribution]) -> tuple[list[str], frozenset[str] | None]:
    """What of ours a shell line installs or runs, and the Pythons it works on (None: any)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return [], None
    ours = {normalise(d.name): d for d in dists}
    scripts = commands(dists)
    named: list[Distribution] = []
    if words and words[0] in scripts:
        named.append(scripts[words[0]])
    if words[:2] == ["pip", "install"] or words[1:3] == ["-m", "pip"]:
        for word in words[2:]:
            if word.startswith("-"):
                continue
            try:
                requirement = Requirement(word)
            except InvalidRequirement:
                continue
            if normalise(requirement.name) in ours:
                named.append(ours[normalise(requirement.name)])
    if not named:
        return [], None
    pythons = frozenset(PYTHONS)
    for dist in named:
        pythons &= supported(dist)
    return [d.name for d in named], pythons


def paragraph_before(doc: Path, line: int) -> str:
    """The paragraph that ends right before line `line` (the fence's), as one string."""
    lines = doc.read_text("utf-8").splitlines()[: line - 1]
    while lines and not lines[-1].strip():
        lines.pop()
    start = len(lines)
    while start > 0 and lines[start - 1].strip():
        start -= 1
    return " ".join(lines[start:])


def tried() -> dict[str, frozenset[str] | None]:
    """The documents the trials try, and the Pythons they are tried on (None: their
    distribution's, a README's)."""
    from tools.release.trial import GUIDES

    return {
        **{
            str((p.parent).relative_to(ROOT) / "README.md"): None
            for p in (ROOT / "packages").glob("*/pyproject.toml")
        },
        **{doc: frozenset({python}) for doc, python in GUIDES.items()},
    }


def check(dists: list[Distribution], problems: Problems) -> None:
    """`problems` for each document the trials try (module docstring)."""
    readmes = {str(d.folder.relative_to(ROOT) / "README.md"): d for d in dists}
    for doc, pythons in tried().items():
        trial_pythons = pythons or supported(readmes[doc])
        for where, what in conflicts(ROOT / doc, doc, dists, trial_pythons):
            problems.add(f"{doc}:{where}", what)


def conflicts(
    path: Path, doc: str, dists: list[Distribution], tried_on: frozenset[str]
) -> list[tuple[int, str]]:
    """(line, why) for each install line of the document whose Pythons do not fit."""
    blocks: dict[int, list[tuple[ShellLine, list[str], frozenset[str]]]] = {}
    for line in install_lines(path, doc):
        names, pythons = needs(line.text, dists)
        if pythons is not None:
            blocks.setdefault(line.block, []).append((line, names, pythons))
    everywhere = frozenset().union(*(p for lines in blocks.values() for _, _, p in lines))
    found: list[tuple[int, str]] = []
    for block, lines in blocks.items():
        widest = max((p for _, _, p in lines), key=len)
        for line, names, pythons in lines:
            if pythons != widest:
                found.append(
                    (
                        line.line,
                        f"`{line.text}` ({', '.join(names)}) installs on Python "
                        f"{_listed(pythons)}, its block's other lines on {_listed(widest)}: "
                        "a block of its own, after a sentence naming its Python",
                    )
                )
            elif not tried_on <= pythons:
                found.append(
                    (
                        line.line,
                        f"`{line.text}` ({', '.join(names)}) installs on Python "
                        f"{_listed(pythons)}, and the document is tried on "
                        f"{_listed(tried_on)}",
                    )
                )
        oldest = min(widest, key=PYTHONS.index)  # "Python 3.13": 3.13 and after
        if widest != everywhere and oldest not in paragraph_before(path, block):
            found.append(
                (
                    block,
                    f"a block for Python {_listed(widest)} (the document's other install lines: "
                    f"{_listed(everywhere)}) without a sentence before it naming its Python",
                )
            )
    return found


def _listed(pythons: frozenset[str]) -> str:
    ordered = [p for p in PYTHONS if p in pythons]
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}-{ordered[-1]}"
