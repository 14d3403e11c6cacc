"""`python -m tools.module_cpu`: a run's modules by CPU (their process's own and its
descendants', those reaped and those still running), most first; a process's last module
carries what its session started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.module_cpu import descendants, main


def test_the_modules_are_summed_over_processes_and_ranked_by_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {
            "module": "a.py",
            "self": 1.0,
            "children": 2.0,
            "wall": 5.0,
            "process": "gw0",
            "last": False,
        },
        {
            "module": "b.py",
            "self": 0.5,
            "children": 4.0,
            "wall": 9.0,
            "process": "gw1",
            "last": False,
        },
        {
            "module": "a.py",
            "self": 1.0,
            "children": 0.0,
            "wall": 1.0,
            "process": "gw2",
            "last": False,
        },
        {
            "module": "c.py",
            "self": 0.1,
            "children": 9.0,
            "wall": 0.5,
            "process": "gw2",
            "last": True,
        },
    ]
    path = tmp_path / "cpu.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    assert main([str(path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [row.split()[-1] for row in rows[1:4]] == ["end)", "b.py", "a.py"]
    assert rows[1].endswith("c.py (and the session's end)")
    assert rows[3].split()[:2] == ["4.0", "2.0"]
    assert rows[-1].split()[0] == "17.6"


def test_a_descendant_still_running_counts_with_what_it_reaped() -> None:
    """A fork server's hosts: its child burns CPU and is reaped by it, not by this process,
    and the server still runs when the module ends; both count."""
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    server = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {burn!r}])\n"
        "print('reaped', flush=True)\n"
        "sys.stdin.read()\n"
    )
    before = descendants()
    with subprocess.Popen(
        [sys.executable, "-c", server], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as running:
        assert running.stdout is not None and running.stdout.readline() == "reaped\n"
        during = descendants()
        assert running.stdin is not None
        running.stdin.close()
    assert during - before >= 0.3
