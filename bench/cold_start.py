"""Cold start: `import function_app` beside the bare SDKs it runs on, each in a fresh interpreter.

On Consumption/Flex plans a new instance pays the worker's import of the app before its first
invocation. The floor is the import of the Azure SDKs the app needs (`azure.functions`,
`azure.cosmos`, `azure.servicebus`) and nothing of ours; the app imports the first and defers
the other two to the first use of Cosmos DB and Service Bus (`entrypoints.bootstrap`), so the
two figures are the cost of what each imports before it can answer.

Rounds alternate the two imports; each figure is the best of its rounds (other processes on the
same cores only ever add to an import's time) and the ratio is of the two best. Timed inside the
interpreter, around the import statement alone (the interpreter's own start is the same for
both and not counted), in CPU time (the process's): the files are in the page cache after the
first round, so the import is CPU, and CPU time is what a loaded machine leaves least disturbed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from typing import Any

from tools.stack import ROOT

APP = "import function_app"
FLOOR = "import azure.functions, azure.cosmos, azure.servicebus"


def _import_seconds(statement: str, *, write_bytecode: bool = False) -> float:
    code = (
        "import time\nstart = time.process_time()\n"
        + statement
        + "\nprint(time.process_time() - start)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def measure(rounds: int = 21) -> dict[str, Any]:
    """Best import times (s) of the app and of its floor over the rounds, and their ratio."""
    # Bytecode caches and the page cache warm: the SDKs' bytecode was written when pip
    # installed them, the app's is written here (as its first start on an instance would, or
    # the deployment's build); without it every round would compile the app's modules (~10%).
    _import_seconds(APP, write_bytecode=True), _import_seconds(FLOOR, write_bytecode=True)
    app, floor = [], []
    for _ in range(rounds):
        app.append(_import_seconds(APP))
        floor.append(_import_seconds(FLOOR))
    return {
        "import_function_app_cpu_s": min(app),
        "import_bare_sdks_cpu_s": min(floor),
        "app_to_floor_ratio": min(app) / min(floor),
        # Each round's two imports run back to back: their ratio shares the machine's state.
        "median_round_ratio": statistics.median(a / f for a, f in zip(app, floor, strict=True)),
        "medians_s": {
            "function_app": statistics.median(app),
            "bare_sdks": statistics.median(floor),
        },
        "floor": FLOOR,
        "rounds": rounds,
    }


if __name__ == "__main__":
    print(measure())
