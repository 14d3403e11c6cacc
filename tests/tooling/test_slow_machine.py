"""`scripts/slow-machine` (`make test-slow`): the command runs with HOGS busy loops beside it
(named to it in SLOW_MACHINE_HOGS), its status is the script's, and the hogs it started end
with it, on a failure and on a SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from funcstack.deadlines import LOOPBACK, SHORT, wait_for

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slow-machine"
# the command, in Python: the hogs the script names are running beside it
REPORT_HOGS = """
import os, sys
hogs = os.environ["SLOW_MACHINE_HOGS"].split()
running = [p for p in hogs if os.path.exists(f"/proc/{p}")]
print("hogs:", " ".join(running), flush=True)
sys.exit(int(sys.argv[1]))
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_command_runs_beside_the_hogs_its_status_kept_the_hogs_stopped() -> None:
    done = subprocess.run(
        [str(SCRIPT), sys.executable, "-c", REPORT_HOGS, "3"],
        env={**os.environ, "HOGS": "2"},
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("slow-machine: 2 CPU hog(s) at nice 0"), done.stdout
    (listed,) = [line for line in done.stdout.splitlines() if line.startswith("hogs:")]
    hogs = [int(p) for p in listed.split()[1:]]
    assert len(hogs) == 2, listed
    wait_for(lambda: not any(alive(p) for p in hogs), "the hogs stopped", LOOPBACK)


def test_a_sigterm_stops_the_hogs_too() -> None:
    process = subprocess.Popen(
        [str(SCRIPT), "sleep", "600"],
        env={**os.environ, "HOGS": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    hog = int(first.split("(pids ")[1].split(")")[0])
    try:
        assert alive(hog)
        process.send_signal(signal.SIGTERM)
        assert process.wait(SHORT) == 143
        wait_for(lambda: not alive(hog), "the hog stopped after a SIGTERM", LOOPBACK)
    finally:  # what this test started ends with it, whatever the script did
        process.kill()
        if alive(hog):
            os.kill(hog, signal.SIGKILL)
        process.wait(LOOPBACK)


def test_a_hog_count_that_is_not_a_number_is_refused_naming_it() -> None:
    done = subprocess.run(
        [str(SCRIPT), "true"],
        env={**os.environ, "HOGS": "many"},
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=False,
    )
    assert done.returncode == 2
    assert "HOGS=many is not a whole number" in done.stderr
