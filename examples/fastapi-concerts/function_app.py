"""The Concerts app (Azure Functions, Python v2 programming model): the FastAPI app served by
`func.AsgiFunctionApp`, the command handler, and cosmos-outbox's relay (the change feed to the
topic). No I/O at import."""

from __future__ import annotations

import azure.functions as func
from concerts.app import api
from concerts.commands import commands
from concerts.outbox import outbox

app = func.AsgiFunctionApp(app=api, http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(commands)
app.register_functions(outbox.relay_blueprint())
