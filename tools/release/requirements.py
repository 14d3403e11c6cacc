"""Every requirement on one of this repository's distributions is met by the version built: the
distributions' own (their extras included) and every one the docs show (a requirement line in a
README, a guide, a requirements file). A range nothing built satisfies is one nobody can install
(the root README's `cosmos-outbox>=0.4,<0.5` beside the operators' `>=0.5,<0.6`)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from tools.release.build import Problems
from tools.release.dists import ROOT, Distribution, normalise

#: A requirement of one of ours written in prose or a requirements file: the name, extras, then a
#: version specifier (a bare name is met by any version).
_CLAUSE = r"[<>=!~]=?[^\s`'\"),;]*"
DOC_REQUIREMENT = (
    r"(?<![\w/.-])(?P<req>{names}(\[[\w,\s-]+\])?\s*(?P<spec>"
    + _CLAUSE
    + r"(,\s*"
    + _CLAUSE
    + r")*))"
)


def check_between(dists: list[Distribution], problems: Problems) -> None:
    """What each distribution requires of another (extras included) is the version built."""
    built = {normalise(d.name): Version(d.version) for d in dists}
    for dist in dists:
        project = tomllib.loads((dist.folder / "pyproject.toml").read_text("utf-8"))["project"]
        lines = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            lines += extra
        for line in lines:
            requirement = Requirement(line)
            name = normalise(requirement.name)
            if name in built and not requirement.specifier.contains(built[name], prereleases=True):
                problems.add(
                    f"{dist.name} pyproject.toml",
                    f"requires {line}, and {name} is {built[name]}",
                )


def documents() -> list[Path]:
    """The files a user copies requirement lines from: every Markdown and requirements file git
    tracks (CHANGELOGs aside: they tell the history, old ranges included)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.md", "*requirements*.txt"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return [ROOT / f for f in listed if f and not f.endswith("CHANGELOG.md")]


def check_docs(dists: list[Distribution], problems: Problems) -> None:
    """Every `cosmos-outbox>=0.5,<0.6`-like line in the docs is met by the version built."""
    for path in documents():
        for where, what in unmet(path.read_text("utf-8"), dists):
            problems.add(f"{path.relative_to(ROOT)}:{where}", what)


def unmet(text: str, dists: list[Distribution]) -> list[tuple[int, str]]:
    """(line, why) for each requirement of one of `dists` in `text` its version does not meet."""
    built = {normalise(d.name): Version(d.version) for d in dists}
    names = "|".join(sorted((re.escape(d.name) for d in dists), key=len, reverse=True))
    pattern = re.compile(DOC_REQUIREMENT.format(names=f"(?:{names})"), re.IGNORECASE)
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in pattern.finditer(line):
            try:
                requirement = Requirement(match["req"].strip().rstrip(".,"))
            except InvalidRequirement:
                continue
            version = built[normalise(requirement.name)]
            if not requirement.specifier.contains(version, prereleases=True):
                found.append(
                    (number, f"{match['req'].strip()} is not met by {requirement.name} {version}")
                )
    return found
