"""Sample v2 app with no HTTP function (copied into a temp dir as function_app.py): the
azure-functions library advises, on every indexing, that an auth level does nothing here."""

from __future__ import annotations

import azure.functions as func

app = func.FunctionApp()


@app.timer_trigger(
    arg_name="timer", schedule="0 0 0 1 1 *", run_on_startup=False, use_monitor=False
)
def yearly(timer: func.TimerRequest) -> None:
    return None
