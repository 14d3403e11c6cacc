"""`cosmos_changefeed.testing` imported in a pytest run without pytest-asyncio (the outbox's test
kit imports it for its in-memory feed; an app's tests run with pytest alone): no warning, and no
error under `--strict-markers`. The async contract's `pytest.mark.asyncio` was 7
`PytestUnknownMarkWarning`s in every such run (the quick start's `# 1 passed` printed
`1 passed, 7 warnings`), and a collection error with `--strict-markers`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from deadlines import SHORT

A_TEST = """
from cosmos_changefeed.testing import InMemoryFeed


def test_the_feed_is_there() -> None:
    assert InMemoryFeed(partitions=1)
"""


def test_importing_the_testing_module_warns_of_nothing_without_pytest_asyncio(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_app.py").write_text(A_TEST)
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:asyncio",
            "-p",
            "no:cacheprovider",
            "--strict-markers",
            "-W",
            "error::pytest.PytestUnknownMarkWarning",
            "test_app.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    summary = ran.stdout.strip().splitlines()[-1]
    assert summary.startswith("1 passed") and "warning" not in summary, summary
