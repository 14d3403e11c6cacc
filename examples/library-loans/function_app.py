"""The Library loans app (Azure Functions, Python v2 programming model): the FastAPI app served
by `func.AsgiFunctionApp` and the hourly overdue timer. No I/O at import."""

from __future__ import annotations

import azure.functions as func
from loans.app import api
from loans.outbox import outbox
from loans.overdue import overdue

app = func.AsgiFunctionApp(app=api, http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(overdue)
app.register_functions(outbox.relay_blueprint())
