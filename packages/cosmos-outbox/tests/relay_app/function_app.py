"""The relay alone as a Functions app (cosmos-outbox's change-feed trigger and backlog timer,
from the app settings), for the package's tests that need the relay running in a local Functions
host (test_cosmos_estimator.py, through funcstack's `funcstack_app`): it relays every event
document its container holds, of any aggregate type, to its topic."""

from __future__ import annotations

import azure.functions as func

from cosmos_outbox import Outbox

app = func.FunctionApp()
app.register_functions(Outbox().relay_blueprint())
