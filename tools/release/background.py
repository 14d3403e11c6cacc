"""What a trial runs in the background, as in a terminal of its own, until a step is done with
it: a command that prints one JSON line once it is ready (funcstack's `--json`), stopped with a
Ctrl-C (SIGINT to its process group, as a terminal sends it), its CPU counted when it ends.

- a guide's `funcstack run --app .` (trial.py: its steps after the install section);
- funcstack's Cosmos DB endpoint for a README block that needs an account
  (```` ```python test="cosmos" ````: `cosmos_endpoint`), started from the repository's venv
  (`.venv/bin/funcstack cosmos`, as the adapter suites' services are on 3.11), so that every
  Python a README is tried on gets one without funcstack in its clean venv.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tools.docblocks import SERVICES
from tools.release.dists import ROOT

#: How long a background command may take to say it is ready.
READY_SECONDS = 240
#: How long it may take to end after a Ctrl-C before it is killed.
STOP_SECONDS = 30
FUNCSTACK = ROOT / ".venv" / "bin" / "funcstack"


class Background:
    """A command (a shell line) run in the background in `cwd`, with `env`."""

    def __init__(self, line: str, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(  # bash with the line, so that it is read as typed
            ["bash", "-c", f"exec {line}"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        #: the CPU (user + system) it and its processes used, once it has ended
        self.cpu = 0.0

    def ready(self) -> dict[str, Any]:
        """Its ready line (`{"ready": true, ...}`), or `{"ready": false, "error": ...}`."""
        ready: list[str] = []
        stdout = self.process.stdout
        reader = threading.Thread(target=lambda: ready.append(stdout.readline() if stdout else ""))
        reader.start()
        reader.join(READY_SECONDS)
        if not ready or not ready[0].strip():
            return {"ready": False, "error": f"no ready line within {READY_SECONDS} s"}
        answer: dict[str, Any] = json.loads(ready[0])
        return answer

    def stop(self) -> str | None:
        """Ctrl-C; killed if it has not ended within STOP_SECONDS (then the reason, in a line)."""
        killed = None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            deadline = time.monotonic() + STOP_SECONDS
            while True:
                pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    _, status, usage = os.wait4(self.process.pid, 0)
                    killed = f"did not stop within {STOP_SECONDS} s of a Ctrl-C: killed"
                    break
                time.sleep(0.1)
            self.process.returncode = os.waitstatus_to_exitcode(status)
            self.cpu = usage.ru_utime + usage.ru_stime
        self.process.communicate()
        return killed


@contextmanager
def cosmos_endpoint(
    folder: Path, env: dict[str, str]
) -> Iterator[tuple[dict[str, str], Background]]:
    """funcstack's Cosmos DB endpoint alone (`funcstack cosmos --port 0 --in-memory --json`,
    from the repository's venv, its state in `folder`), and the environment a README tells a
    reader to set for it (SERVICES["cosmos"]: its address, its key, the trust of its
    certificate). Yields that environment and the endpoint (its `cpu` counted once the block
    is left and it has stopped); a RuntimeError when it does not start."""
    if not FUNCSTACK.exists():
        raise RuntimeError(f"{FUNCSTACK} is missing: make setup builds it")
    folder.mkdir(parents=True, exist_ok=True)
    endpoint = Background(f"{FUNCSTACK} cosmos --port 0 --in-memory --json", folder, env)
    try:
        answer = endpoint.ready()
        if not answer.get("ready"):
            raise RuntimeError(f"funcstack cosmos did not start: {answer.get('error')}")
        parts = dict(
            p.split("=", 1) for p in answer["connectionString"].strip(";").split(";") if "=" in p
        )
        given = {
            "COSMOS_ENDPOINT": answer["endpoint"],
            "COSMOS_KEY": parts["AccountKey"],
            "SSL_CERT_FILE": answer["caBundle"],
            "REQUESTS_CA_BUNDLE": answer["caBundle"],
        }
        assert set(given) == set(SERVICES["cosmos"]), "SERVICES['cosmos'] and this disagree"
        yield given, endpoint
    finally:
        endpoint.stop()
