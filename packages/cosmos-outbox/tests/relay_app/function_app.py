"""The relay alone as a Functions app (cosmos-outbox's change-feed trigger and backlog timer,
from the app settings), for the package's tests that need the relay running in a local Functions
host (test_cosmos_estimator.py, test_hosted_relay.py, through funcstack's `funcstack_app`): it
relays every event document its container holds, of any aggregate type, to its topic.

With RELAY_APP_OWN_TRIGGER_OUT set, the app has a Cosmos DB trigger of its own beside the relay,
on the same container and lease container with no prefix, as a team's app would (its docs tell
it to register the relay beside its own functions): it appends each document id it is handed to
that file, one a line."""

from __future__ import annotations

import os
from pathlib import Path

import azure.functions as func

from cosmos_outbox import Outbox

app = func.FunctionApp()
app.register_functions(Outbox().relay_blueprint())

OWN_TRIGGER_OUT = os.environ.get("RELAY_APP_OWN_TRIGGER_OUT")

if OWN_TRIGGER_OUT:

    @app.cosmos_db_trigger(
        arg_name="documents",
        connection="CosmosDBConnection",
        database_name="%COSMOS_DATABASE%",
        container_name="%COSMOS_CONTAINER%",
        lease_container_name="%COSMOS_LEASE_CONTAINER%",
        create_lease_container_if_not_exists=True,
        start_from_beginning=True,  # type: ignore[arg-type]  # azure-functions 2.3 types it `time`
        feed_poll_delay=100,
    )
    def own_trigger(documents: func.DocumentList) -> None:
        with Path(str(OWN_TRIGGER_OUT)).open("a", encoding="utf-8") as out:
            out.writelines(f"{doc['id']}\n" for doc in documents)
