"""Docs and docstrings point readers at files; every file they name exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"\b(?:tests|domain|application|infra|entrypoints|deploy|packages|tools|bench)/"
                   r"[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(?:py|json|bicep|js)\b")


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py", "*.md"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    return [ROOT / name for name in listed]


def bases(path: Path) -> list[Path]:
    """Where a file's names are read from: the repository, and for a file of a package under
    packages/ that package's folder too (its docs name its own tests/, src/)."""
    parts = path.relative_to(ROOT).parts
    return [ROOT, *([ROOT / parts[0] / parts[1]] if parts[0] == "packages" else [])]


def test_every_file_named_in_a_docstring_or_doc_exists() -> None:
    missing = {
        f"{path.relative_to(ROOT)} names {name}"
        for path in tracked_text_files() if path.exists()
        for name in NAMED.findall(path.read_text("utf-8"))
        if not any((base / name).exists() for base in bases(path))
    }
    assert missing == set()
