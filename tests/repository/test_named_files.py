"""Docs and docstrings point readers at files; every file they name exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(
    r"\b(?:tests|domain|application|infra|entrypoints|deploy|emulators|bench|"
    r"packages|examples|subscriber|tools|src|scripts)/"
    r"[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(?:py|json|bicep|js|md|toml)\b"
)


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.py", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed]


def exists(name: str, named_in: Path) -> bool:
    """A path as written from the repository's root, from the naming file's folder, or from
    the package or app folder it sits in (packages/<name>/, examples/<name>/)."""
    relative = named_in.relative_to(ROOT).parts
    bases = [ROOT, named_in.parent]
    if relative[0] in {"packages", "examples"} and len(relative) > 2:
        bases.append(ROOT / relative[0] / relative[1])
    return any((base / name).exists() for base in bases)


#: The first line of a Markdown code block that names the file of the reader's app it shows
#: (`# tests/test_<name>.py`; tests/repository/test_docs_run.py writes the block there).
BLOCK_FILE = re.compile(r"^```[^\n]*\n#\s*[A-Za-z0-9_./-]+\.py\b.*$", re.MULTILINE)


def test_every_file_named_in_a_docstring_or_doc_exists() -> None:
    missing = {
        f"{path.relative_to(ROOT)} names {name}"
        for path in tracked_text_files()
        if path.exists()
        for name in NAMED.findall(BLOCK_FILE.sub("", path.read_text("utf-8")))
        if not exists(name, path)
    }
    assert missing == set()
