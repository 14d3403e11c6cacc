"""A distribution's CHANGELOG.md as a release reads and writes it ([Keep a Changelog]: a `## [X.Y.Z]
- YYYY-MM-DD` section per version, the latest first, `## [Unreleased]` on top; a section's entries
are list items and paragraphs, under `###` subheadings or not).

- `problems`: what the release check says of a CHANGELOG (`make release-check`: the version in
  pyproject.toml has a dated section; at the distribution's tag, also that no entry waits under
  `[Unreleased]`, under a `###` subheading or not, and that the version's section has entries);
- `notes`: the version's section, its `###` subheadings and their entries with it: the GitHub
  release's notes (the release workflow);
- `release`: the release commit's edit (RELEASING.md, "A release"): what `[Unreleased]` holds
  moved into the version's section, dated; `[Unreleased]` left empty on top. A version whose
  section was dated before and never tagged (never published) takes the entries into that
  section, its date the new one.

    python -m tools.release.changelog notes <distribution>-v<version>
    python -m tools.release.changelog release <distribution> [--date YYYY-MM-DD]

[Keep a Changelog]: https://keepachangelog.com/en/1.1.0/
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
from dataclasses import dataclass, field

from tools.release.dists import ROOT, Distribution, distributions

UNRELEASED = "Unreleased"
HEADING = re.compile(r"^## \[(?P<name>[^\]]+)\](?:\s+-\s+(?P<date>\S+))?(?P<rest>.*)$")
#: A link reference definition (`[1.0.0]: https://...`): not an entry.
LINK = re.compile(r"^\[[^\]]+\]:\s")


@dataclass
class Section:
    """One `## ` section: its name (a version, or "Unreleased"), its date as written (None when
    undated), what follows the date on the heading line, and its body's lines."""

    name: str
    date: str | None
    rest: str
    body: list[str] = field(default_factory=list)
    #: The heading of a section that names no version (`## Before the first release`).
    plain: str | None = None

    @property
    def heading(self) -> str:
        if self.plain is not None:
            return self.plain
        dated = f" - {self.date}" if self.date else ""
        return f"## [{self.name}]{dated}{self.rest}"

    @property
    def entries(self) -> list[str]:
        """Its entries' lines: every line but blank ones, `###` subheadings and links."""
        return [
            line
            for line in self.body
            if line.strip() and not line.startswith("#") and not LINK.match(line)
        ]

    def dated(self) -> bool:
        """Dated with a day of the calendar, nothing after it on the heading."""
        if self.date is None or self.rest.strip():
            return False
        try:
            datetime.date.fromisoformat(self.date)
        except ValueError:
            return False
        return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", self.date))


@dataclass
class Changelog:
    """The lines before the first section, and the sections in order."""

    head: list[str]
    sections: list[Section]

    @classmethod
    def parse(cls, text: str) -> Changelog:
        head: list[str] = []
        sections: list[Section] = []
        for line in text.splitlines():
            found = HEADING.match(line)
            if found:
                sections.append(Section(found["name"], found["date"], found["rest"]))
            elif line.startswith("## "):
                sections.append(Section(line[3:].strip(), None, "", plain=line))
            elif sections:
                sections[-1].body.append(line)
            else:
                head.append(line)
        return cls(head, sections)

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def text(self) -> str:
        lines = list(self.head)
        for section in self.sections:
            lines += [section.heading, *section.body]
        return "\n".join(lines).rstrip("\n") + "\n"


def problems(text: str, version: str, *, released: bool) -> list[str]:
    """What is wrong with a CHANGELOG for `version`; `released`: at the distribution's tag."""
    changelog = Changelog.parse(text)
    section = changelog.section(version)
    found = []
    if section is None or not section.dated():
        found.append(f"no heading '## [{version}] - YYYY-MM-DD' for the version in pyproject.toml")
    if not released:
        return found
    unreleased = changelog.section(UNRELEASED)
    if unreleased is not None and unreleased.entries:
        found.append(
            f"an [{UNRELEASED}] section holds entries (they would not be in the release: "
            "python -m tools.release.changelog release <distribution> moves them)"
        )
    if section is not None and not section.entries:
        found.append(f"the [{version}] section has no entries (the release's notes)")
    return found


def notes(text: str, version: str) -> str:
    """The version's section without its heading: its entries and `###` subheadings."""
    section = Changelog.parse(text).section(version)
    if section is None:
        raise ValueError(f"no section [{version}]")
    return "\n".join(section.body).strip("\n") + "\n"


def release(text: str, version: str, day: datetime.date) -> str:
    """The release commit's CHANGELOG: `[Unreleased]`'s entries in the version's section dated
    `day`, after that section's opening paragraph when it had one (a version dated before and
    never published), `[Unreleased]` left on top, empty."""
    changelog = Changelog.parse(text)
    unreleased = changelog.section(UNRELEASED)
    moved = _trimmed(unreleased.body) if unreleased is not None else []
    section = changelog.section(version)
    if section is None:
        section = Section(version, None, "")
        at = changelog.sections.index(unreleased) + 1 if unreleased is not None else 0
        changelog.sections.insert(at, section)
    section.date, section.rest = day.isoformat(), ""
    opening, rest = _opening(_trimmed(section.body))
    headed = any(line.startswith("### ") for line in moved)
    if headed and rest and not rest[0].startswith("### "):
        rest = ["### Earlier entries", "", *rest]  # not left under the moved entries' last
    parts = [part for part in (opening, moved, rest) if part]
    section.body = [""] + [line for part in parts for line in [*part, ""]]
    if unreleased is not None:
        unreleased.body = [""]
    else:
        changelog.sections.insert(0, Section(UNRELEASED, None, "", [""]))
    return changelog.text()


def _trimmed(lines: list[str]) -> list[str]:
    text = "\n".join(lines).strip("\n")
    return text.split("\n") if text else []


def _opening(lines: list[str]) -> tuple[list[str], list[str]]:
    """A section's opening paragraph (text before its first entry or subheading), and the rest."""
    if not lines or lines[0].startswith(("### ", "- ", "* ")):
        return [], lines
    end = lines.index("") if "" in lines else len(lines)
    return lines[:end], _trimmed(lines[end:])


def _tagged(dist: Distribution) -> bool:
    tag = f"{dist.name}-v{dist.version}"
    listed = subprocess.run(
        ["git", "tag", "--list", tag], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return bool(listed.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release.changelog")
    verbs = parser.add_subparsers(dest="verb", required=True)
    told = verbs.add_parser("notes", help="print the tagged version's section (release notes)")
    told.add_argument("tag", help="<distribution>-v<version>")
    made = verbs.add_parser("release", help="move [Unreleased] into the version's dated section")
    made.add_argument("distribution")
    made.add_argument("--date", type=datetime.date.fromisoformat, default=datetime.date.today())
    args = parser.parse_args(argv)
    dists = {d.name: d for d in distributions()}
    if args.verb == "notes":
        name, _, version = args.tag.rpartition("-v")
        if name not in dists:
            parser.error(f"{args.tag}: no distribution {name!r} (they are {', '.join(dists)})")
        sys.stdout.write(notes((dists[name].folder / "CHANGELOG.md").read_text("utf-8"), version))
        return 0
    dist = dists.get(args.distribution)
    if dist is None:
        parser.error(f"no distribution {args.distribution!r} (they are {', '.join(dists)})")
    if _tagged(dist):
        parser.error(
            f"{dist.name}-v{dist.version} is tagged (released): set the next version in "
            f"{dist.folder.relative_to(ROOT)}/pyproject.toml first"
        )
    path = dist.folder / "CHANGELOG.md"
    path.write_text(release(path.read_text("utf-8"), dist.version, args.date), "utf-8")
    print(f"{path.relative_to(ROOT)}: [{UNRELEASED}] moved into [{dist.version}] - {args.date}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
