"""What a maintainer meets at a release (RELEASING.md), each shown to hold on the real files: the
CHANGELOG as the release commit leaves it (`tools.release.changelog release`) passes the tag's
check, its `###` subheadings and their entries in the release's notes; an entry left under
`[Unreleased]` is refused at the tag, under a subheading or not, and only for the tagged
distribution; the release order printed; every make command the docs show is one make takes,
and one it refuses is named; an install line for fewer Pythons than its block, or than its
document is tried on, is named; each README names the test commands the trials run."""

from __future__ import annotations

import datetime
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.release import build, changelog, commands, installs, own_tests, trial
from tools.release.dists import ROOT, Distribution, distributions, read

DAY = datetime.date(2026, 12, 10)


def copies(root: Path) -> list[Distribution]:
    """The six distributions' pyproject.toml and CHANGELOG.md, copied under `root`."""
    found = []
    for dist in distributions():
        folder = root / dist.folder.name
        folder.mkdir(parents=True)
        for name in ("pyproject.toml", "CHANGELOG.md"):
            shutil.copy(dist.folder / name, folder / name)
        found.append(read(folder))
    return found


def _entries(path: Path) -> list[str]:
    """The entries under a CHANGELOG's `[Unreleased]`."""
    section = changelog.Changelog.parse(path.read_text("utf-8")).section(changelog.UNRELEASED)
    return section.entries if section is not None else []


@pytest.mark.parametrize("name", [d.name for d in distributions()])
def test_the_release_commits_changelog_passes_the_tags_check_with_every_entry_in_the_notes(
    name: str, tmp_path: Path
) -> None:
    dists = copies(tmp_path)
    dist = next(d for d in dists if d.name == name)
    path = dist.folder / "CHANGELOG.md"
    if not _entries(path):  # its next version prepared already (dated): an entry planted
        heading = f"## [{changelog.UNRELEASED}]\n"
        text = path.read_text("utf-8").replace(heading, f"{heading}\n- A change to release.\n", 1)
        path.write_text(text, "utf-8")
    before = changelog.Changelog.parse(path.read_text("utf-8"))
    unreleased = before.section(changelog.UNRELEASED)
    assert unreleased is not None and unreleased.entries  # what the release must carry
    tag = f"{dist.name}-v{dist.version}"

    problems = build.Problems()
    build.check_changelogs(dists, problems, tag)
    assert problems.found == [
        f"{name} CHANGELOG.md: an [Unreleased] section holds entries (they would not be in the "
        "release: python -m tools.release.changelog release <distribution> moves them)"
    ]

    path.write_text(changelog.release(path.read_text("utf-8"), dist.version, DAY), "utf-8")
    problems = build.Problems()
    build.check_changelogs(dists, problems, tag)  # the other four hold entries: not theirs
    assert problems.found == []
    after = path.read_text("utf-8")
    assert f"## [{changelog.UNRELEASED}]\n\n## [{dist.version}] - {DAY.isoformat()}\n" in after
    notes = changelog.notes(after, dist.version)
    subheadings = [line for line in unreleased.body if line.startswith("### ")]
    assert all(line in notes for line in unreleased.entries + subheadings)
    section = before.section(dist.version)
    assert section is not None
    assert all(line in notes for line in section.entries)  # never published: one section
    kept = sorted(line for s in before.sections for line in s.body if line.strip())
    moved = changelog.Changelog.parse(after).sections
    assert sorted(line for s in moved for line in s.body if line.strip()) == kept


def test_entries_under_a_subheading_of_unreleased_are_refused_at_the_tag() -> None:
    text = (
        "# Changelog\n\n## [Unreleased]\n\n### Fixed\n\n- a fix\n\n"
        "## [1.0.0] - 2026-11-26\n\n### Added\n\n- a feature\n"
    )
    assert changelog.problems(text, "1.0.0", released=False) == []
    assert changelog.problems(text, "1.0.0", released=True) == [
        "an [Unreleased] section holds entries (they would not be in the release: "
        "python -m tools.release.changelog release <distribution> moves them)"
    ]
    released = changelog.release(text, "1.0.1", DAY)
    assert changelog.problems(released, "1.0.1", released=True) == []
    assert changelog.notes(released, "1.0.1") == "### Fixed\n\n- a fix\n"
    assert changelog.notes(released, "1.0.0") == "### Added\n\n- a feature\n"


def test_a_heading_not_dated_with_a_day_is_named() -> None:
    for heading in ("## [1.0.0] - unreleased", "## [1.0.0] - 2026-13-01", "## [1.0.0]"):
        assert changelog.problems(
            f"# Changelog\n\n{heading}\n\n- a\n", "1.0.0", released=False
        ) == ["no heading '## [1.0.0] - YYYY-MM-DD' for the version in pyproject.toml"]


def test_the_release_verb_refuses_a_version_already_tagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dists = copies(tmp_path)
    monkeypatch.setattr(changelog, "distributions", lambda: dists)
    monkeypatch.setattr(changelog, "ROOT", tmp_path)
    monkeypatch.setattr(changelog, "_tagged", lambda dist: dist.name == "funcstack")
    assert changelog.main(["release", "cosmos-outbox", "--date", "2026-12-10"]) == 0
    assert "[Unreleased] moved into [0.5.0] - 2026-12-10" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        changelog.main(["release", "funcstack"])
    assert "funcstack-v0.1.0 is tagged (released)" in capsys.readouterr().err


def run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_the_release_order_is_printed() -> None:
    printed = run("tools.release.dists").splitlines()
    assert [line.split()[1] for line in printed] == [d.name for d in distributions()]
    assert printed[1].endswith("(requires cosmos-changefeed)")


def test_the_notes_are_printed_for_a_tag() -> None:
    dist = distributions()[0]
    printed = run("tools.release.changelog", "notes", f"{dist.name}-v{dist.version}")
    assert printed == changelog.notes((dist.folder / "CHANGELOG.md").read_text(), dist.version)


def test_a_make_command_make_refuses_is_named(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "Makefile").write_text("RELEASE_TAG ?=\ncheck:\n\t@echo $(RELEASE_TAG)\n")
    (tmp_path / "DOC.md").write_text(
        "Run `make check --tag v1`, or `make check RELEASE_TAG=<tag>`, or `make chek`:\n\n"
        "```bash\nmake check RELEASE_TAG=v1   # the tag's\n```\n"
    )
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    assert commands.refused(tmp_path) == [
        "DOC.md:1: `make check --tag v1`: make: unrecognized option '--tag'",
        "DOC.md:1: `make chek`: make: *** No rule to make target 'chek'.  Stop.",
    ]


def test_every_make_command_the_docs_show_is_one_make_takes() -> None:
    assert len(commands.documented()) > 100
    assert commands.refused() == []


def test_an_install_line_for_fewer_pythons_than_its_block_is_named(tmp_path: Path) -> None:
    dists = distributions()
    doc = tmp_path / "guide.md"
    doc.write_text(
        "# A guide\n\n## Install\n\nIn its venv:\n\n```bash\npip install cosmos-outbox\n"
        "pip install funcstack   # the local stack\n```\n"
    )
    everything = frozenset({"3.13"})
    assert installs.conflicts(doc, "guide.md", dists, everything) == [
        (
            9,
            "`pip install funcstack   # the local stack` (funcstack) installs on Python "
            "3.13-3.14, its block's other lines on 3.11-3.14: a block of its own, after a "
            "sentence naming its Python",
        )
    ]
    doc.write_text(
        "# A guide\n\n## Install\n\nIn its venv:\n\n```bash\npip install cosmos-outbox\n```\n\n"
        "To run it locally:\n\n```bash\npip install funcstack\nfuncstack setup\n```\n"
    )
    assert installs.conflicts(doc, "guide.md", dists, everything) == [
        (
            13,
            "a block for Python 3.13-3.14 (the document's other install lines: 3.11-3.14) "
            "without a sentence before it naming its Python",
        )
    ]
    doc.write_text(doc.read_text().replace("locally:", "locally, on Python 3.13:"))
    assert installs.conflicts(doc, "guide.md", dists, everything) == []
    assert installs.conflicts(doc, "guide.md", dists, frozenset({"3.11"})) == [
        (
            14,
            "`pip install funcstack` (funcstack) installs on Python 3.13-3.14, and the "
            "document is tried on 3.11",
        ),
        (
            15,
            "`funcstack setup` (funcstack) installs on Python 3.13-3.14, and the document is "
            "tried on 3.11",
        ),
    ]


def test_the_docs_the_trials_try_install_on_the_pythons_their_blocks_say() -> None:
    problems = build.Problems()
    installs.check(distributions(), problems)
    assert problems.found == []


def test_each_readme_names_the_test_commands_the_trials_run(tmp_path: Path) -> None:
    assert {name: (spec.extras, spec.args) for name, spec in own_tests.own_tests().items()} == {
        "cosmos-changefeed": ("test", {"*": ("-m", "not integration")}),
        "cosmos-outbox": (
            "test",
            {"*": ("-m", "not integration and not e2e"), "3.11": ("-m", "not e2e")},
        ),
        "cosmos-outbox-operators": ("test", {"*": ("-m", "not integration and not e2e")}),
        "cosmos-sql": ("test", {"*": ()}),
        "funcstack": ("test", {"*": ("-m", "not integration and not e2e")}),
    }
    problems = build.Problems()
    own_tests.check(distributions(), problems)
    assert problems.found == []
    [dist] = [d for d in copies(tmp_path) if d.name == "funcstack"]
    readme = dist.folder / "README.md"
    readme.write_text("# funcstack\n\n## Tests\n\n```bash\npip install funcstack\npytest\n```\n")
    problems = build.Problems()
    own_tests.check([dist], problems)
    assert problems.found == [
        'funcstack README.md: no "## Tests" section with a `python -m pytest` line (a bare '
        "`pytest` does not put the folder on the import path)",
        'funcstack README.md: no `pip install "funcstack[<extra>]"` line in its "## Tests" section',
    ]


def test_a_guides_app_that_warns_on_its_first_run_is_named(tmp_path: Path) -> None:
    log = tmp_path / "example.log"
    log.write_text(
        "<frozen runpy>:128: RuntimeWarning: 'funcstack.functions_host.__main__' found\n"
        "2026-11-28 04:26:24,476 INFO cosmos_changefeed processor 'outbox.': listening\n"
        "2026-11-28 04:26:24,477 WARNING cosmos_changefeed processor 'outbox.': the lease "
        "container has TTL off\n"
    )
    # Python's own warnings too: runpy's, which every host printed twice (fixed at its cause)
    assert trial.warnings(log) == [
        "<frozen runpy>:128: RuntimeWarning: 'funcstack.functions_host.__main__' found",
        "2026-11-28 04:26:24,477 WARNING cosmos_changefeed processor 'outbox.': the lease "
        "container has TTL off",
    ]
    assert trial.warnings(tmp_path / "none.log") == []
