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


def sdist_includes(package: Path) -> list[str]:
    """What the package's sdist holds (pyproject.toml's `[tool.hatch.build.targets.sdist]`)."""
    import tomllib

    settings = tomllib.loads((package / "pyproject.toml").read_text("utf-8"))
    found: list[str] = settings["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    return found


@pytest.mark.parametrize("package", sorted(ROOT.glob("packages/*/")), ids=lambda p: p.name)
def test_a_package_readme_links_nothing_outside_its_sdist(package: Path) -> None:
    """A package's README is its PyPI page and travels in its sdist: a relative link is to a
    file of the package that its sdist includes, else it is dead there (`../../examples/...`)."""
    readme = package / "README.md"
    includes = sdist_includes(package)
    outside = []
    for target in relative_links(readme):
        file = unquote(target.partition("#")[0])
        if not file:
            continue
        linked = (package / file).resolve()
        inside = linked.is_relative_to(package.resolve())
        relative = linked.relative_to(package.resolve()).as_posix() if inside else ""
        if not inside or not any(relative == i or relative.startswith(f"{i}/") for i in includes):
            outside.append(target)
    assert outside == []
