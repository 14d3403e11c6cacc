"""An app that declares another Python version (``.python-version``) than the one funcstack's
host runs it with gets one line at start saying so; an app that declares none, or the same,
gets none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from funcstack.functions_host._launcher import start_runner
from funcstack.functions_host._python_version import declared_python, python_version_notice

from .conftest import make_app_dir

OTHER = "3.12" if sys.version_info[:2] != (3, 12) else "3.11"


@pytest.mark.parametrize(
    ("text", "declared"),
    [
        ("3.12\n", (3, 12)),
        ("3.11.9", (3, 11)),
        ("# pinned\n\n3.13.1\n", (3, 13)),
        ("cpython-3.12.4\n", (3, 12)),
        ("python-3.11", (3, 11)),
        ("pypy3.10\n", None),
        ("3\n", None),
        ("", None),
    ],
)
def test_the_declared_version_is_the_first_line_of_python_version(
    tmp_path: Path, text: str, declared: tuple[int, int] | None
) -> None:
    (tmp_path / ".python-version").write_text(text)
    assert declared_python(tmp_path) == declared


def test_no_notice_without_a_declaration_or_with_this_version(tmp_path: Path) -> None:
    assert python_version_notice(tmp_path) is None
    (tmp_path / ".python-version").write_text("{}.{}\n".format(*sys.version_info[:2]))
    assert python_version_notice(tmp_path) is None
    assert python_version_notice(tmp_path, sys.executable) is None


def test_another_version_is_named_with_the_one_that_runs(tmp_path: Path) -> None:
    (tmp_path / ".python-version").write_text(f"{OTHER}\n")
    notice = python_version_notice(tmp_path)
    here = "{}.{}".format(*sys.version_info[:2])
    assert notice is not None
    assert f"declares Python {OTHER} (.python-version)" in notice
    assert f"on Python {here}" in notice


@pytest.mark.integration
def test_the_host_says_it_in_one_line_at_start(tmp_path: Path) -> None:
    app_dir = make_app_dir(
        tmp_path,
        "sample_http_app.py",
        {"FUNCTIONS_WORKER_RUNTIME": "python", "SAMPLE_SETTING": "s", "SAMPLE_ROUTE": "r"},
    )
    (app_dir / ".python-version").write_text(f"{OTHER}\n")
    runner = start_runner(
        app_dir=app_dir,
        settings_file=app_dir / "local.settings.json",
        log_path=tmp_path / "runner.log",
    )
    runner.stop()
    lines = [
        line
        for line in (tmp_path / "runner.log").read_text().splitlines()
        if "declares Python" in line
    ]
    assert len(lines) == 1, lines
    assert "WARNING" in lines[0] and f"Python {OTHER} (.python-version)" in lines[0]
