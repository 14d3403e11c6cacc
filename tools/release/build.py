"""Build every distribution once, and check what was built before anything installs it.

Each distribution's sdist is built from its folder, then its wheel **from that sdist** (as pip
builds one from an sdist, in a scratch folder outside the repository, with the npm registry
pointed at a closed port: a build that needed npm or a file the sdist lacks fails), and a second
wheel from the tree, which must hold the same files, byte for byte. The fifteen builds share one
build environment, made once from the `[build-system]` requirements every distribution names
(`build_environment`), where they all name the same; else each is isolated, as pip's. Then:

- `twine check --strict`: the metadata and the README rendered as PyPI renders it
  (readme_renderer);
- `check-wheel-contents`: the wheel's files (no bytecode, no duplicates, no stray top level);
- the sdist holds every file git tracks in the distribution's folder, and nothing else but its
  metadata and the build's declared artifacts (check-manifest's rule, without building again);
- the wheel's metadata: licence file, project URLs, `py.typed`, a README with no link relative to
  the repository (PyPI shows it alone);
- every requirement between the distributions, and every one the docs show, met by the version
  built (`requirements`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from tools.release import changelog
from tools.release.dists import ROOT, Distribution

#: Files an sdist may hold that git does not track: its metadata, and what a build hook puts in
#: the package (the operators' htmx, fetched from npm; `artifacts` in its pyproject.toml).
UNTRACKED_IN_SDIST = re.compile(
    r"^(PKG-INFO|\.gitignore|src/cosmos_outbox_operators/_console/static/vendor/[^/]+)$"
)
#: The project URLs every distribution's page shows.
URLS = ("Homepage", "Source", "Documentation", "Changelog", "Issues")
#: A Markdown link or image whose target is neither absolute nor an anchor of the same page.
RELATIVE_LINK = re.compile(r"\]\((?!https?://|#|mailto:)(?P<target>[^)\s]+)\)")


@dataclass
class Problems:
    """What the checks found, by distribution (or by doc)."""

    found: list[str] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        self.found.append(f"{where}: {what}")


def uv() -> str:
    return os.environ.get("UV") or str(ROOT / ".uv" / "bin" / "uv")


def build_environment(dists: list[Distribution], scratch: Path) -> str | None:
    """One build environment for every build, made once, where every distribution's
    `[build-system]` requires the same (all six: hatchling): the environment each of uv's
    isolated builds makes, with the same requirements from the same index, made once instead
    of eighteen times (each build compiled hatchling's modules anew: about 0.25 s of CPU). Its
    Python, or None (uv's isolated build each time) where the requirements differ."""
    requires = {tuple(sorted(build_requires(d))) for d in dists}
    if len(requires) != 1:
        return None
    venv = scratch / "build-env"
    python = str(venv / "bin" / "python")
    quiet = ["--quiet", "--no-config", "--no-python-downloads"]
    subprocess.run([uv(), "venv", *quiet, "--python", sys.executable, venv], check=True)
    subprocess.run(
        [uv(), "pip", "install", *quiet, "--python", python, *requires.pop()], check=True
    )
    return python


def build_requires(dist: Distribution) -> list[str]:
    """The distribution's `[build-system]` requirements."""
    pyproject = tomllib.loads((dist.folder / "pyproject.toml").read_text("utf-8"))
    return list(pyproject["build-system"]["requires"])


def build(dist: Distribution, out: Path, scratch: Path, python: str | None = None) -> None:
    """The sdist into `out`, the wheel built from it into `out`, and the tree's wheel into
    `scratch/tree` (for `compare_wheels`); in `python`'s environment (`build_environment`),
    else each in an isolated one of uv's."""
    quiet = [
        "--quiet",
        "--no-config",
        "--no-python-downloads",
        "--python",
        python or sys.executable,
    ]
    quiet += ["--no-build-isolation"] if python else []
    subprocess.run([uv(), "build", *quiet, "--sdist", "-o", out, dist.folder], check=True)
    # No npm registry, and no repository around: the sdist is unpacked in uv's scratch folder.
    closed = {**os.environ, "NPM_CONFIG_REGISTRY": "http://127.0.0.1:9/", "NPM_CONFIG_OFFLINE": "1"}
    subprocess.run(
        [uv(), "build", *quiet, "--wheel", "-o", out, out / dist.sdist], check=True, env=closed
    )
    tree = scratch / "tree"
    subprocess.run([uv(), "build", *quiet, "--wheel", "-o", tree, dist.folder], check=True)


def compare_wheels(dist: Distribution, out: Path, scratch: Path, problems: Problems) -> None:
    """The wheel built from the sdist holds what the tree's holds, byte for byte."""
    with (
        zipfile.ZipFile(out / dist.wheel) as shipped,
        zipfile.ZipFile(scratch / "tree" / dist.wheel) as tree,
    ):
        ours = {n: shipped.read(n) for n in shipped.namelist()}
        theirs = {n: tree.read(n) for n in tree.namelist()}
    for name in sorted(set(ours) ^ set(theirs)):
        where = (
            "only the sdist's wheel"
            if name in ours
            else "only the tree's wheel (the sdist lacks it)"
        )
        problems.add(dist.wheel, f"{name} in {where}")
    for name in sorted(n for n in set(ours) & set(theirs) if ours[n] != theirs[n]):
        problems.add(dist.wheel, f"{name} differs between the sdist's wheel and the tree's")


def check_sdist_files(dist: Distribution, out: Path, problems: Problems) -> None:
    """Every file git tracks in the folder is in the sdist; nothing untracked is, but metadata
    and declared artifacts (a file the tree has and git does not, like a stray __pycache__,
    would ship)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", "."],
        cwd=dist.folder,
        capture_output=True,
        check=True,
        text=True,
    ).stdout.split("\0")
    tracked_files = {t for t in tracked if t}
    prefix = f"{dist.module}-{dist.version}/"
    with tarfile.open(out / dist.sdist) as sdist:
        shipped = {m.name.removeprefix(prefix) for m in sdist.getmembers() if m.isfile()}
    for missing in sorted(tracked_files - shipped):
        problems.add(dist.sdist, f"{missing} is tracked by git and missing from the sdist")
    for extra in sorted(shipped - tracked_files):
        if not UNTRACKED_IN_SDIST.match(extra):
            problems.add(dist.sdist, f"{extra} is in the sdist and not tracked by git")


def check_metadata(dist: Distribution, out: Path, problems: Problems) -> None:
    """What PyPI's page shows and what a type checker looks for."""
    with zipfile.ZipFile(out / dist.wheel) as wheel:
        names = wheel.namelist()
        info = f"{dist.module}-{dist.version}.dist-info"
        metadata = Parser().parsestr(wheel.read(f"{info}/METADATA").decode("utf-8"))
    if not any(n.startswith(f"{info}/licenses/") for n in names):
        problems.add(dist.wheel, "no licence file (LICENSE beside pyproject.toml)")
    if f"{dist.module}/py.typed" not in names:
        problems.add(dist.wheel, f"no {dist.module}/py.typed: type checkers ignore its hints")
    labels = {u.split(",", 1)[0].strip() for u in metadata.get_all("Project-URL") or []}
    for label in URLS:
        if label not in labels:
            problems.add(dist.wheel, f"no project URL labelled {label}")
    readme = metadata.get_payload()
    assert isinstance(readme, str)
    for link in RELATIVE_LINK.finditer(readme):
        problems.add(
            dist.wheel,
            f"its README links to {link['target']}, relative to the repository: broken on PyPI",
        )


def check_changelog(dist: Distribution, problems: Problems, *, released: bool) -> None:
    """The CHANGELOG has a dated section for this version; with `released` (the distribution's
    tag, in the release workflow) no entry waits under "Unreleased" (under a `###` subheading
    or not) and the version's section has entries: `changelog.problems`."""
    text = (dist.folder / "CHANGELOG.md").read_text("utf-8")
    for problem in changelog.problems(text, dist.version, released=released):
        problems.add(f"{dist.name} CHANGELOG.md", problem)


def check_changelogs(dists: list[Distribution], problems: Problems, tag: str | None) -> None:
    """Every CHANGELOG (`check_changelog`); at a tag, its distribution's as released: its
    entries must all be in the release, where the others may hold their next release's."""
    for dist in dists:
        check_changelog(dist, problems, released=tag == f"{dist.name}-v{dist.version}")


def run_tools(out: Path, problems: Problems) -> None:
    """twine and check-wheel-contents over dist/, once each."""
    bin_dir = Path(os.environ.get("RELEASE_TOOLS_BIN", ROOT / ".venv" / "bin"))
    files = sorted(str(p) for p in out.iterdir() if p.suffix in (".whl", ".gz"))
    wheels = [f for f in files if f.endswith(".whl")]
    for command in (
        [str(bin_dir / "twine"), "check", "--strict", *files],
        [str(bin_dir / "check-wheel-contents"), *wheels],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            problems.add(Path(command[0]).name, (done.stdout + done.stderr).strip())
