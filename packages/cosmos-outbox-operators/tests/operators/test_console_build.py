"""htmx travels with the package (hatch_build.py): fetched from npm when the package is built
from its source tree, pinned by hash, in the wheel and in the sdist with its licence; a build
from the sdist needs no npm, and a build that cannot get it stops, saying what to install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from deadlines import LONG

PACKAGE = Path(__file__).resolve().parents[2]
VENDOR = "cosmos_outbox_operators/_console/static/vendor"

pytest.importorskip("hatchling")


def build(
    source: Path, out: Path, *targets: str, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **({"PATH": path} if path is not None else {})}
    arguments = [a for t in targets for a in ("-t", t)]
    return subprocess.run(
        [sys.executable, "-m", "hatchling", "build", *arguments, "-d", str(out)],
        cwd=source,
        env=environment,
        capture_output=True,
        text=True,
        timeout=LONG,
        check=False,
    )


def test_the_sdist_carries_htmx_and_its_wheel_builds_without_npm(tmp_path: Path) -> None:
    done = build(PACKAGE, tmp_path / "dist", "sdist")
    assert done.returncode == 0, done.stderr
    [sdist] = (tmp_path / "dist").glob("cosmos_outbox_operators-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        archive.extractall(tmp_path / "unpacked", filter="data")
    assert any(n.endswith(f"src/{VENDOR}/htmx.min.js") for n in names)
    assert any(n.endswith(f"src/{VENDOR}/htmx.LICENSE") for n in names)
    [unpacked] = (tmp_path / "unpacked").iterdir()
    no_npm = str(Path(sys.executable).parent)  # python, and no npm
    assert shutil.which("npm", path=no_npm) is None
    done = build(unpacked, tmp_path / "wheel", "wheel", path=no_npm)
    assert done.returncode == 0, done.stderr
    [wheel] = (tmp_path / "wheel").glob("cosmos_outbox_operators-*.whl")
    shipped = zipfile.ZipFile(wheel).namelist()
    assert f"{VENDOR}/htmx.min.js" in shipped and f"{VENDOR}/htmx.LICENSE" in shipped


def test_a_build_without_htmx_nor_npm_stops_saying_what_to_install(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(
        PACKAGE,
        tree,
        ignore=shutil.ignore_patterns("tests", "__pycache__", "vendor", "*.egg-info"),
    )
    no_npm = str(Path(sys.executable).parent)
    done = build(tree, tmp_path / "dist", "wheel", path=no_npm)
    assert done.returncode != 0
    assert "npm is not on the PATH" in done.stderr
    assert "install cosmos-outbox-operators from its wheel or its sdist" in done.stderr
