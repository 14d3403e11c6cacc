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


def _import_seconds(statement: str) -> float:
    code = ("import time\nstart = time.process_time()\n" + statement +
            "\nprint(time.process_time() - start)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def measure(rounds: int = 15) -> dict[str, Any]:
    """Best import times (s) of the app and of its floor over the rounds, and their ratio."""
    _import_seconds(APP), _import_seconds(FLOOR)  # bytecode caches and the page cache warm
    app, floor = [], []
    for _ in range(rounds):
        app.append(_import_seconds(APP))
        floor.append(_import_seconds(FLOOR))
    return {
        "import_function_app_cpu_s": min(app),
        "import_bare_sdks_cpu_s": min(floor),
        "app_to_floor_ratio": min(app) / min(floor),
        "medians_s": {"function_app": statistics.median(app),
                      "bare_sdks": statistics.median(floor)},
        "floor": FLOOR,
        "rounds": rounds,
    }


if __name__ == "__main__":
    print(measure())
