"""What a trial runs in the background, as in a terminal of its own, until a step is done with
it: a command that prints one JSON line once it is ready (funcstack's `--json`), stopped with a
Ctrl-C (SIGINT to its process group, as a terminal sends it), its CPU counted when it ends.

- a guide's `funcstack run --app .` (trial.py: its steps after the install section);
- funcstack's Cosmos DB endpoint for the README blocks that need an account
  (```` ```python test="cosmos" ````: `CosmosAccount`, one for the check, lent to one trial at a
  time), started from the repository's venv (`.venv/bin/funcstack cosmos`, as the adapter
  suites' services are on 3.11), so that every Python a README is tried on gets one without
  funcstack in its clean venv.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from azure.core.exceptions import AzureError

from tools.docblocks import SERVICES
from tools.release.dists import ROOT

if TYPE_CHECKING:
    from azure.cosmos import CosmosClient

T = TypeVar("T")

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


class CosmosAccount:
    """funcstack's Cosmos DB endpoint alone (`funcstack cosmos --port 0 --in-memory --json`,
    from the repository's venv, its state in `folder`), one for every trial whose first example
    needs an account (```` ```python test="cosmos" ````): started when the first trial asks,
    lent to one trial at a time (`lent`), stopped by `stop` (its CPU counted then).

    cosmos-changefeed's first processor names its database (`shop`), its containers and its
    processor as a reader's code would: two trials at once on one account would share its leases
    and each other's orders. So a trial has the account alone, as it had an endpoint of its own
    before: empty when lent (a database left there fails the trial, named), every database in
    it deleted when it is given back. The trials' examples wait for it one after another (a few
    seconds each)."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        #: how many trials it was lent to
        self.lent_to = 0
        self._lock = threading.Lock()
        self._endpoint: Background | None = None
        self._given: dict[str, str] | None = None
        self._client: CosmosClient | None = None

    @property
    def cpu(self) -> float:
        """The CPU (user + system) its endpoint used, once stopped."""
        return self._endpoint.cpu if self._endpoint is not None else 0.0

    @contextmanager
    def lent(self) -> Iterator[dict[str, str]]:
        """The environment a README tells a reader to set for the account (SERVICES["cosmos"]:
        its address, its key, the trust of its certificate), for this trial alone; a
        RuntimeError when the endpoint does not start, the account is not empty, or what the
        trial made cannot be deleted."""
        with self._lock:
            given = self._given if self._given is not None else self._start()
            left = self._read(self.databases)
            if left:
                raise RuntimeError(
                    f"the Cosmos DB account is not empty: {', '.join(left)} left in it"
                )
            self.lent_to += 1
            try:
                yield given
            finally:
                self._read(self._empty)

    @staticmethod
    def _read(do: Callable[[], T]) -> T:
        """`do()`; what the SDK raises (the endpoint gone, say) as a RuntimeError."""
        try:
            return do()
        except (AzureError, OSError) as exc:
            raise RuntimeError(f"the Cosmos DB account did not answer: {exc}") from exc

    def _start(self) -> dict[str, str]:
        if not FUNCSTACK.exists():
            raise RuntimeError(f"{FUNCSTACK} is missing: make setup builds it")
        if self._endpoint is not None:
            raise RuntimeError("funcstack cosmos did not start for an earlier trial")
        self.folder.mkdir(parents=True, exist_ok=True)
        self._endpoint = Background(
            f"{FUNCSTACK} cosmos --port 0 --in-memory --json", self.folder, self.env
        )
        answer = self._endpoint.ready()
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
        from azure.cosmos import CosmosClient

        from funcstack.cosmos import local_tls

        # this process's client verifies the endpoint with funcstack's local authority, the
        # one that signed it (the machine's, in funcstack's cache)
        tls = local_tls()
        if str(tls.ca_file) != answer["caFile"]:
            raise RuntimeError(
                f"funcstack cosmos was signed by {answer['caFile']}, not {tls.ca_file}"
            )
        self._client = self._read(
            lambda: CosmosClient(
                given["COSMOS_ENDPOINT"], given["COSMOS_KEY"], **tls.client_options()
            )
        )
        self._given = given
        return given

    def databases(self) -> list[str]:
        """The names of the account's databases."""
        assert self._client is not None
        return sorted(str(d["id"]) for d in self._client.list_databases())

    def _empty(self) -> None:
        for name in self.databases():
            self.delete(name)

    def delete(self, database: str) -> None:
        assert self._client is not None
        self._client.delete_database(database)

    def stop(self) -> None:
        """The endpoint stopped (Ctrl-C), if it started."""
        if self._client is not None:
            self._client.close()
        if self._endpoint is not None:
            self._endpoint.stop()
