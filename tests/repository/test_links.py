"""Every relative link of the repository's Markdown leads somewhere: to a file that exists and,
for `path#anchor` or `#anchor`, to a heading of that file (GitHub's slug of it)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (
    "README.md",
    "RELEASING.md",
    "docs/*.md",
    "packages/*/README.md",
    "packages/*/docs/*.md",
    "examples/*/README.md",
    "deploy/README.md",
    "conformance/RESULTS.md",
)
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
# [text](target) or [text](target "title"); the text may hold `code` and brackets of its own.
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"`[^`]*`")


def documents() -> list[Path]:
    return sorted({path for pattern in DOCUMENTS for path in ROOT.glob(pattern)})


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, spaces,
    hyphens and underscores kept), spaces as hyphens."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose(path.read_text("utf-8")):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    return [
        target
        for line in prose(path.read_text("utf-8"))
        for target in LINK.findall(CODE_SPAN.sub("", line))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)
    ]


def broken(path: Path, target: str) -> str | None:
    """Why `target`, linked from `path`, leads nowhere; None when it leads somewhere."""
    file, _, anchor = target.partition("#")
    linked = (path.parent / unquote(file)).resolve() if file else path
    if not linked.exists():
        return "no such file"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"no heading #{anchor} in {linked.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(path: Path) -> None:
    dead = {
        f"{target}: {why}"
        for target in relative_links(path)
        if (why := broken(path, target)) is not None
    }
    assert dead == set()


def test_the_readme_links_every_docs_page() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve() for target in relative_links(ROOT / "README.md")
    }
    assert {page.resolve() for page in (ROOT / "docs").glob("*.md")} - linked == set()


def test_the_checker_sees_links_and_headings() -> None:
    assert (
        slug("API and relay as separate apps (`splitRelay`)")
        == "api-and-relay-as-separate-apps-splitrelay"
    )
    assert slug("What to watch, and what to do") == "what-to-watch-and-what-to-do"
    assert relative_links(ROOT / "README.md"), "the README links nothing: the pattern is wrong"
    assert "how-cosmos-outbox-travels" in anchors(ROOT / "deploy" / "README.md")


#: This repository on GitHub: a package's README (its PyPI page, where a relative link leads
#: nowhere) links into the repository with this prefix; the link is checked as a relative one.
REPOSITORY = re.compile(
    r"^https://github\.com/cosmos-outbox/cosmos-outbox/(?:blob|tree)/main/(.+)$"
)


def repository_links(path: Path) -> list[str]:
    """The links of `path` into this repository on GitHub, as paths from the root."""
    return [
        found[1]
        for line in prose(path.read_text("utf-8"))
        for target in LINK.findall(CODE_SPAN.sub("", line))
        if (found := REPOSITORY.match(target))
    ]


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_into_the_repository_leads_to_a_file_and_heading(path: Path) -> None:
    dead = {
        f"{target}: {why}"
        for target in repository_links(path)
        if (why := broken(ROOT / "README.md", target)) is not None
    }
    assert dead == set()


@pytest.mark.parametrize("package", sorted(ROOT.glob("packages/*/")), ids=lambda p: p.name)
def test_a_package_readme_links_by_absolute_url_only(package: Path) -> None:
    """A package's README is its PyPI page, shown there alone: a relative link leads nowhere
    (the release check, tools/release, reads the same in the built wheel's metadata)."""
    assert [t for t in relative_links(package / "README.md") if not t.startswith("#")] == []
