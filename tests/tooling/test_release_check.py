"""The release check's own checks (tools/release), each shown to catch what it is for, in-process
on small distributions made here: a file git tracks missing from an sdist, a wheel from the
sdist that differs from the tree's, a requirement between ours or in a doc that the versions
built do not meet, a README's relative link, the release order, the local index's pages, the
docs' shell lines as the trials read them, and the blocks that need a service (a Cosmos DB
account) run only where it is given, with only what their document says to set, and the one
account the check lends its trials' blocks, one trial at a time. `make release-check` runs them
all on the real six."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from funcstack.deadlines import LOOPBACK
from tools.docblocks import (
    SERVICES,
    install_lines,
    json_files,
    needs,
    python_blocks,
    shell_lines,
    write_project,
)
from tools.release import __main__ as release
from tools.release import build, index, requirements
from tools.release.background import CosmosAccount
from tools.release.dists import ROOT, Distribution, distributions, read

PYPROJECT = """[project]
name = "{name}"
version = "{version}"
requires-python = ">=3.11"
classifiers = ["Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3.13"]
dependencies = [{dependencies}]

[project.optional-dependencies]
test = [{test}]
"""


def distribution(
    root: Path, name: str, version: str, *, dependencies: str = "", test: str = ""
) -> Distribution:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        PYPROJECT.format(name=name, version=version, dependencies=dependencies, test=test)
    )
    return read(folder)


def sdist(path: Path, prefix: str, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{prefix}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_a_file_git_tracks_and_the_sdist_lacks_is_named(tmp_path: Path) -> None:
    dist = distribution(tmp_path, "shop", "1.0.0")
    (dist.folder / "src").mkdir()
    (dist.folder / "src" / "shop.txt").write_text("x = 1\n")
    (dist.folder / "stray.pyc").write_bytes(b"\0")
    subprocess.run(["git", "init", "-q"], cwd=dist.folder, check=True)
    subprocess.run(["git", "add", "pyproject.toml", "src/shop.txt"], cwd=dist.folder, check=True)
    out = tmp_path / "dist"
    out.mkdir()
    prefix = f"{dist.module}-{dist.version}"
    whole = {"pyproject.toml": b"", "src/shop.txt": b"x = 1\n", "PKG-INFO": b""}
    sdist(out / dist.sdist, prefix, whole)
    problems = build.Problems()
    build.check_sdist_files(dist, out, problems)
    assert problems.found == []

    sdist(out / dist.sdist, prefix, {"pyproject.toml": b"", "stray.pyc": b"\0"})
    build.check_sdist_files(dist, out, problems)
    assert problems.found == [
        "shop-1.0.0.tar.gz: src/shop.txt is tracked by git and missing from the sdist",
        "shop-1.0.0.tar.gz: stray.pyc is in the sdist and not tracked by git",
    ]


def test_a_wheel_from_the_sdist_that_differs_from_the_trees_is_named(tmp_path: Path) -> None:
    dist = distribution(tmp_path, "shop", "1.0.0")
    out, scratch = tmp_path / "dist", tmp_path / "scratch"
    (scratch / "tree").mkdir(parents=True)
    out.mkdir()
    for folder, files in (
        (out, {"shop/__init__.py": b"x = 1\n", "shop/data.json": b"{}"}),
        (
            scratch / "tree",
            {"shop/__init__.py": b"x = 2\n", "shop/data.json": b"{}", "shop/a.js": b""},
        ),
    ):
        with zipfile.ZipFile(folder / dist.wheel, "w") as wheel:
            for name, data in files.items():
                wheel.writestr(name, data)
    problems = build.Problems()
    build.compare_wheels(dist, out, scratch, problems)
    assert problems.found == [
        "shop-1.0.0-py3-none-any.whl: shop/a.js in only the tree's wheel (the sdist lacks it)",
        "shop-1.0.0-py3-none-any.whl: shop/__init__.py differs between the sdist's wheel and the "
        "tree's",
    ]


def test_a_requirement_between_ours_that_no_version_built_meets_is_named(tmp_path: Path) -> None:
    core = distribution(tmp_path, "shop-core", "0.5.0")
    kit = distribution(
        tmp_path,
        "shop-kit",
        "0.1.0",
        dependencies='"shop-core>=0.5,<0.6"',
        test='"shop-core>=0.4,<0.5"',
    )
    problems = build.Problems()
    requirements.check_between([core, kit], problems)
    assert problems.found == [
        "shop-kit pyproject.toml: requires shop-core>=0.4,<0.5, and shop-core is 0.5.0"
    ]


def test_a_requirement_a_doc_shows_that_no_version_built_meets_is_named(tmp_path: Path) -> None:
    core = distribution(tmp_path, "shop-core", "0.5.0")
    kit = distribution(tmp_path, "shop-core-kit", "0.1.0")
    text = (
        "Add `shop-core>=0.4,<0.5` to requirements.txt.\n"
        'pip install "shop-core[aio]>=0.5,<0.6" shop-core-kit\n'
        "shop-core-kit==0.2.0\n"
    )
    assert requirements.unmet(text, [core, kit]) == [
        (1, "shop-core>=0.4,<0.5 is not met by shop-core 0.5.0"),
        (3, "shop-core-kit==0.2.0 is not met by shop-core-kit 0.1.0"),
    ]


def test_a_readme_link_relative_to_the_repository_is_named(tmp_path: Path) -> None:
    dist = distribution(tmp_path, "shop", "1.0.0")
    out = tmp_path / "dist"
    out.mkdir()
    info = f"{dist.module}-{dist.version}.dist-info"
    metadata = (
        "Metadata-Version: 2.4\nName: shop\nVersion: 1.0.0\n"
        + "".join(f"Project-URL: {label}, https://example.org\n" for label in build.URLS)
        + "\n[the changelog](CHANGELOG.md), [a heading](#install), [site](https://example.org)\n"
    )
    with zipfile.ZipFile(out / dist.wheel, "w") as wheel:
        wheel.writestr(f"{info}/METADATA", metadata)
        wheel.writestr(f"{info}/licenses/LICENSE", "MIT")
        wheel.writestr("shop/py.typed", "")
    problems = build.Problems()
    build.check_metadata(dist, out, problems)
    assert problems.found == [
        "shop-1.0.0-py3-none-any.whl: its README links to CHANGELOG.md, relative to the "
        "repository: broken on PyPI"
    ]


def test_a_changelog_without_the_versions_dated_heading_is_named(tmp_path: Path) -> None:
    dist = distribution(tmp_path, "shop", "1.0.0")
    changelog = dist.folder / "CHANGELOG.md"
    changelog.write_text("# Changelog\n\n## [Unreleased]\n\n- a fix\n\n## [1.0.0] - 2026-11-26\n")
    problems = build.Problems()
    build.check_changelog(dist, problems, released=False)
    assert problems.found == []
    build.check_changelog(dist, problems, released=True)  # at a tag: the fix would be left out
    assert problems.found == [
        "shop CHANGELOG.md: an [Unreleased] section holds entries (they would not be in the "
        "release: python -m tools.release.changelog release <distribution> moves them)",
        "shop CHANGELOG.md: the [1.0.0] section has no entries (the release's notes)",
    ]
    changelog.write_text("# Changelog\n\n## [1.0.0] - unreleased\n")
    problems = build.Problems()
    build.check_changelog(dist, problems, released=False)
    assert problems.found == [
        "shop CHANGELOG.md: no heading '## [1.0.0] - YYYY-MM-DD' for the version in pyproject.toml"
    ]


def test_the_release_order_puts_each_distribution_after_what_it_requires() -> None:
    assert [d.name for d in distributions()] == [
        "cosmos-changefeed",
        "cosmos-outbox",
        "cosmos-sql",
        "cosmos-outbox-testing",
        "cosmos-outbox-operators",
        "funcstack",
    ]


def test_the_builds_share_one_environment_only_where_every_build_system_asks_for_the_same(
    tmp_path: Path,
) -> None:
    # Requirements that differ: no shared environment (each build an isolated one of uv's),
    # and nothing made.
    ours = [distribution(tmp_path, name, "1.0.0") for name in ("a-one", "a-two")]
    for dist, requires in zip(ours, ('["hatchling>=1.25,<2"]', '["setuptools>=70"]'), strict=True):
        with (dist.folder / "pyproject.toml").open("a") as pyproject:
            pyproject.write(f"\n[build-system]\nrequires = {requires}\n")
    assert [build.build_requires(d) for d in ours] == [["hatchling>=1.25,<2"], ["setuptools>=70"]]
    assert build.build_environment(ours, tmp_path) is None
    assert not (tmp_path / "build-env").exists()
    assert {tuple(build.build_requires(d)) for d in distributions()} == {("hatchling>=1.25,<2",)}


def test_the_trials_take_the_systems_python_first_and_find_pythons_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This test's Python (3.13) stands in for the system's: its variable unset, it is taken
    # first; named as another version it is refused, and find-python's order gives one; its
    # variable set, that one is taken.
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / f"python{version}").symlink_to(sys.executable)
    (tmp_path / "python3.12").symlink_to(sys.executable)
    monkeypatch.setattr(release, "SYSTEM_PYTHON", f"{tmp_path}/python{{version}}")
    monkeypatch.delenv("PYTHON", raising=False)
    monkeypatch.delenv("PYTHON312", raising=False)
    found = release.interpreters([version, "3.12"])
    assert found[version] == str(tmp_path / f"python{version}")
    assert "3.12" not in found or found["3.12"] != str(tmp_path / "python3.12")
    monkeypatch.setenv("PYTHON", sys.executable)
    assert release.interpreters([version]) == {version: sys.executable}


def test_the_local_index_is_a_pep_503_page_per_project(tmp_path: Path) -> None:
    dist = distribution(tmp_path, "Shop_Core", "1.0.0")
    out = tmp_path / "dist"
    out.mkdir()
    (out / dist.sdist).write_bytes(b"sdist")
    (out / dist.wheel).write_bytes(b"wheel")
    index.write([dist], out, tmp_path / "index")
    page = (tmp_path / "index" / "simple" / "shop-core" / "index.html").read_text()
    digest = hashlib.sha256(b"wheel").hexdigest()
    assert f'href="../../files/{dist.wheel}#sha256={digest}"' in page
    assert 'data-requires-python="&gt;=3.11"' in page
    assert 'href="shop-core/"' in (tmp_path / "index" / "simple" / "index.html").read_text()


def test_the_docs_shell_lines_are_read_as_a_terminal_runs_them(tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text(
        "# Guide\n\n## Install\n\n```bash\npip install shop   # the shop\n"
        'pip install "shop[aio]" \\\n  shop-kit\n```\n\n'
        "`host.json`, the host's:\n\n```json\n{}\n```\n\n"
        "## Run it\n\n```\nshop run --app .\n```\n\n```python\nprint('not shell')\n```\n"
    )
    assert [line.text for line in install_lines(doc, "guide")] == [
        "pip install shop   # the shop",
        'pip install "shop[aio]" shop-kit',
    ]
    assert [(s.heading, s.text) for s in shell_lines(doc, "guide")][-1] == (
        "Run it",
        "shop run --app .",
    )
    assert json_files(doc) == {"host.json": "{}\n"}


@pytest.mark.parametrize("doc", ["docs/quick-start.md", "docs/your-own-app.md", "README.md"])
def test_every_guide_the_check_tries_has_install_lines_without_placeholders(doc: str) -> None:
    """A `<placeholder>` in a line the check runs verbatim is a doc bug: bash reads `<` as a
    redirection."""
    root = Path(__file__).resolve().parents[2]
    lines = shell_lines(root / doc, doc)
    assert install_lines(root / doc, doc)
    assert [line.text for line in lines if "<" in line.text.split("#", 1)[0]] == []


DOCS_WITH_PYTHON = sorted(
    str(p.relative_to(ROOT))
    for p in (ROOT / "README.md", *ROOT.glob("packages/*/README.md"), *ROOT.glob("docs/*.md"))
)


@pytest.mark.parametrize("doc", DOCS_WITH_PYTHON)
def test_a_block_that_needs_a_service_runs_with_only_what_its_document_says_to_set(
    doc: str,
) -> None:
    """A block fenced test="cosmos" runs in the release check with the variables SERVICES
    names set (tools/release/background.py sets those and no others): its document must tell
    a reader to set each, before the block, or the block does not run as written."""
    text = (ROOT / doc).read_text("utf-8").splitlines()
    for example in python_blocks(ROOT / doc):
        wanted = needs(example)
        told = "\n".join(text[: example.start_line])
        unnamed = [v for v in SERVICES.get(wanted or "", ()) if f"`{v}" not in told]
        assert unnamed == [], f"{doc}:{example.start_line} needs {unnamed} and never says so"


def test_a_block_fenced_with_a_need_nobody_gives_is_refused(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text('# Shop\n\n```python test="servicebus"\nprint("hi")\n```\n')
    [example] = python_blocks(doc)
    with pytest.raises(AssertionError, match='test="servicebus" is none of typecheck, cosmos'):
        needs(example)


def test_a_block_runs_only_where_what_it_needs_is_given(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text(
        '# Shop\n\n```python test="cosmos"\nprint("account")\n```\n\n'
        '```python test="typecheck"\nprint("never")\n```\n\n```python\nprint("always")\n```\n'
    )
    blocks = python_blocks(doc)
    assert list(write_project("README.md", tmp_path / "a", blocks)) == ["script:example_11.py"]
    assert list(write_project("README.md", tmp_path / "b", blocks, {"cosmos"})) == [
        "script:example_3.py",
        "script:example_11.py",
    ]


class AccountOfNames(CosmosAccount):
    """The check's Cosmos DB account with its databases as a set of names: the lending, without
    an endpoint (the release check lends the real one)."""

    def __init__(self) -> None:
        super().__init__(Path("unused"), {})
        self.names: set[str] = set()

    def _start(self) -> dict[str, str]:
        self._given = {"COSMOS_ENDPOINT": "https://127.0.0.1:1/"}
        return self._given

    def databases(self) -> list[str]:
        return sorted(self.names)

    def delete(self, database: str) -> None:
        self.names.remove(database)


def test_the_first_examples_account_is_lent_empty_to_one_trial_at_a_time() -> None:
    """cosmos-changefeed's first processor names its database and processor: trials sharing
    the account take it one at a time, each finds it empty and leaves it empty."""
    account = AccountOfNames()
    inside: list[int] = []
    seen: list[str] = []  # what a trial found that it should not have

    def trial(number: int) -> None:
        with account.lent():
            inside.append(number)
            if account.names:
                seen.append(f"trial {number} found {sorted(account.names)}")
            account.names.add("shop")
            time.sleep(0.05)  # held a moment: another trial inside meanwhile would be seen
            if inside != [number]:
                seen.append(f"trials {inside} at once")
            inside.remove(number)

    threads = [threading.Thread(target=trial, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LOOPBACK)
        assert not thread.is_alive(), f"a trial not done within {LOOPBACK:g} s"
    assert seen == []
    assert account.lent_to == 3
    assert account.names == set()
    account.names.add("left-behind")
    with pytest.raises(RuntimeError, match="not empty: left-behind left in it"), account.lent():
        pass
    assert account.lent_to == 3
