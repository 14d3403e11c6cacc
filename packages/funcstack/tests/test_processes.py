"""What a serving process does after an interrupted start: every child of it that still runs is
stopped (SIGTERM, then SIGKILL), even one no part knows (the interrupt landed while it was
being created)."""

from __future__ import annotations

import subprocess
import sys

from funcstack.deadlines import SHORT

PROBE = """
import signal, subprocess, sys
from funcstack._processes import stop_stray_children
from funcstack.deadlines import LOOPBACK

polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
stubborn = subprocess.Popen([sys.executable, "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
stubborn.stdout.readline()
stop_stray_children(grace=0.5)
print(polite.wait(LOOPBACK), stubborn.wait(LOOPBACK))
"""


def test_every_child_still_running_is_stopped_and_a_stubborn_one_killed() -> None:
    # in a process of its own: here it would stop this test process's other children
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=SHORT, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["-15", "-9"]
