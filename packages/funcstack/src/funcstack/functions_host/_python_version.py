"""The Python version an app declares, beside the one funcstack's host runs it with.

In Azure an app's Python version is a setting of the site, not of the app's files: on Flex
Consumption ``functionAppConfig.runtime`` (``{"name": "python", "version": "3.12"}``), on the
other plans ``siteConfig.linuxFxVersion`` (``"Python|3.12"``); the platform's worker for that
version runs the app (learn.microsoft.com, "Azure Functions Python developer guide", Python
version). Locally an app declares it the way Python tools read it: a ``.python-version`` file in
its folder (pyenv's and uv's; its first line, ``3.12`` or ``3.12.4``).

funcstack's host needs Python 3.13 (it drives the worker library of Azure's Python 3.13 worker,
azure-functions-runtime), so it runs every app's code on its own interpreter. When the app
declares another version the host says so in one line at start (a warning), so that nobody
takes a pass here for a pass on that version: the app's own unit tests run on its version
(docs/other-pythons.md).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

__all__ = ["DECLARATION_FILE", "declared_python", "python_version_notice"]

#: The file an app declares its Python version in (pyenv's, uv's).
DECLARATION_FILE = ".python-version"
_VERSION = re.compile(r"^(?:python-?|cpython-?)?(\d+)\.(\d+)(?:\.\d+)?\s*$", re.IGNORECASE)


def declared_python(app_dir: Path) -> tuple[int, int] | None:
    """The major and minor version in the app's ``.python-version`` (its first line that is not
    a comment); None when there is no such file or it names no version funcstack can read."""
    path = Path(app_dir) / DECLARATION_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _VERSION.match(line)
        return (int(match.group(1)), int(match.group(2))) if match else None
    return None


def _interpreter_version(python: str | None) -> tuple[int, int] | None:
    if python is None:
        return sys.version_info[:2]
    try:
        run = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        major, minor = run.stdout.split()
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def python_version_notice(app_dir: Path, python: str | None = None) -> str | None:
    """One line when the app declares a Python version other than the worker's interpreter's
    (``python``; default: this one), saying what runs; None otherwise."""
    declared = declared_python(app_dir)
    if declared is None:
        return None
    running = _interpreter_version(python)
    if running is None or running == declared:
        return None
    wanted, here = ".".join(map(str, declared)), ".".join(map(str, running))
    return (
        f"the app declares Python {wanted} ({DECLARATION_FILE}); funcstack's host runs its "
        f"functions on Python {here} (it needs 3.13): run its unit tests on {wanted} too "
        "(funcstack docs/other-pythons.md)"
    )
