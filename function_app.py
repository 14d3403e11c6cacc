"""Azure Functions entrypoint (v2 programming model): the app and the blueprints it registers.

- the contact API (`entrypoints.contacts`): each operation declared once, next to its handler;
- the outbox (`entrypoints.outbox`): the change-feed relay, the backlog timer and the operators'
  routes, for any aggregate, built from settings;
- the docs (`entrypoints.docs`): health, openapi.json and the 404/405 fallback, read from the
  indexed functions.

No I/O at import: dependencies are built lazily on first use by `entrypoints.bootstrap`. The
outbox blueprint reads its trigger settings (poll delay, batch size, backlog schedule) from the
app settings at indexing, and fails indexing naming a bad one.
"""

from __future__ import annotations

import azure.functions as func

from domain.contact import Contact
from entrypoints.bootstrap import dependencies
from entrypoints.contacts import contacts_blueprint
from entrypoints.docs import docs_blueprint
from entrypoints.http.routing import FunctionApp
from entrypoints.outbox import outbox_blueprint

app = FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(contacts_blueprint(lambda: dependencies().api))
app.register_functions(outbox_blueprint(lambda: dependencies().outbox))
app.register_functions(docs_blueprint(
    app.get_functions, ping=lambda: dependencies().ping(), aggregates=(Contact,),
    title="Contacts outbox API",
    description="Contacts saved with their domain events in one Cosmos DB transactional "
                "batch; events relayed to Service Bus."))
