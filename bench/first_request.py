"""Cold start through the local Functions host: from the host's process start to the app's first
201 on `POST /api/contacts`, beside the same for a bare `azure.functions` app.

Each round starts a host (`python -m funcstack.functions_host`: the host process, then its
worker, which imports and indexes the app and answers "ready") and times, from just before the
process is spawned, the first answered request: for the app, a `POST /api/contacts` (its first
201: the app's dependencies are built on it, its Cosmos DB client and the store reached); for the
floor, a bare app of one HTTP function that imports nothing but `azure.functions` and answers
201. The two alternate, against one local Cosmos DB endpoint; each figure is the best of its
rounds (other processes on the same cores only ever add to it) and the ratio is of the two best,
reported with when each host said ready (worker started, app indexed).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from funcstack.functions_host import RunningRunner, start_runner
from tools.httpclient import Client
from tools.stack import Ports, Stack

BODY = {
    "firstName": "Ada",
    "lastName": "Lovelace",
    "email": "ada@example.com",
    "companyName": "Engines",
}

BARE_APP = """import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="contacts", methods=["POST"])
def create(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("{}", status_code=201, mimetype="application/json")
"""


def _first_201(start: float, runner: RunningRunner) -> tuple[float, float]:
    """(seconds to ready, seconds to the first 201) from `start`."""
    ready = time.perf_counter() - start
    client = Client(runner.url)
    try:
        reply = client.request("POST", "/contacts", json_body=BODY)
        assert reply.status == 201, reply.status
        return ready, time.perf_counter() - start
    finally:
        client.close()


def measure(base: Path, rounds: int = 5) -> dict[str, Any]:
    bare_dir = base / "bare-app"
    bare_dir.mkdir(parents=True)
    (bare_dir / "function_app.py").write_text(BARE_APP)
    (bare_dir / "host.json").write_text('{"version": "2.0"}\n')
    app: list[tuple[float, float]] = []
    floor: list[tuple[float, float]] = []
    with Stack(
        workdir=base / "stack", ports=Ports.free(), with_servicebus=False, with_runner=False
    ) as stack:
        for _ in range(rounds):
            start = time.perf_counter()
            runner = stack.start_runner()
            try:
                app.append(_first_201(start, runner))
            finally:
                stack.stop_runner()
            start = time.perf_counter()
            bare = start_runner(app_dir=bare_dir, settings={}, log_path=base / "bare-host.log")
            try:
                floor.append(_first_201(start, bare))
            finally:
                bare.stop()
    app_best, floor_best = min(f for _, f in app), min(f for _, f in floor)
    return {
        "app_ready_s": min(r for r, _ in app),
        "app_first_201_s": app_best,
        "bare_ready_s": min(r for r, _ in floor),
        "bare_first_201_s": floor_best,
        "app_to_bare_ratio": app_best / floor_best,
        "medians_s": {
            "app_first_201": statistics.median(f for _, f in app),
            "bare_first_201": statistics.median(f for _, f in floor),
        },
        "rounds": rounds,
    }


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(measure(Path(tmp)))
