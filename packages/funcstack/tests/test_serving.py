"""``serve``'s exit status when Ctrl-C reaches the whole process group: a part may end of it
before the serving process has run its handler, and that is the stop asked for (0), not a part
that died (1). Run in a process of its own: ``serve`` installs signal handlers and stops stray
children of the process it runs in."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from funcstack.deadlines import SHORT

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, threading
    from pathlib import Path
    from funcstack import serving
    from funcstack.deadlines import LOOPBACK
    from funcstack.serving import serve

    folder = Path(sys.argv[1])
    ENDED = sys.argv[2] == "ended"
    if ENDED:  # the grace the SIGINT has to reach it in: a timer's on a slow machine too
        serving._SIGNAL_GRACE_SECONDS = LOOPBACK

    class Parts:
        def start(self): return self
        def stop(self): pass
        def pids(self): return []
        def dead_part(self):
            if not ENDED:
                return None
            # the group's Ctrl-C ended a part; it reaches this process a moment later
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            return ("cosmos", -2)
        def ended(self, name, code): return f"exited unexpectedly (exit code {code})"
        def record_exit(self, name, code): return []
        def log_path(self, name): return folder / f"{name}.log"

    if not ENDED:  # a part that dies with no signal anywhere
        Parts.dead_part = lambda self: ("cosmos", 1)
    sys.exit(serve(Parts(), folder / "pids.json", banner=lambda: "up", prog="t",
                   starting="starting"))
    """
)


def serve_exit(tmp_path: Path, case: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), case],
        capture_output=True,
        text=True,
        timeout=SHORT,
    )


def test_a_part_ended_by_the_groups_ctrl_c_is_the_stop_not_a_death(tmp_path: Path) -> None:
    ran = serve_exit(tmp_path, "ended")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "exited unexpectedly" not in ran.stderr


def test_a_part_that_dies_with_no_signal_still_stops_the_stack_with_1(tmp_path: Path) -> None:
    ran = serve_exit(tmp_path, "died")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "cosmos exited unexpectedly" in ran.stderr
