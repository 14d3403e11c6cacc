"""The subscriber app: contact events from its own session-enabled subscription into a
projection (contacts_projection), and the projection read over HTTP (`GET
/api/projections/contacts/{id}` and a paged list; a function key in Azure, none locally).
Bindings only; the projection is in `contacts_projection`, the inbox, ordering and tolerant
dispatch are cosmos-outbox's (`cosmos_outbox.subscriber`).

One session = one contact: the host hands a contact's events over one at a time, in order.
Success completes the message; an exception abandons it (redelivered, then dead-lettered after
the subscription's MaxDeliveryCount). Only a message that is not an outbox event at all fails:
an action this subscriber does not handle, or an event of another aggregate type (its
subscription filters on `aggregateType`, so one arrives only if that filter is missing), is
recorded and acknowledged, so a new event type never stalls a contact's session.
"""

from __future__ import annotations

import azure.functions as func
from contacts_projection import http
from contacts_projection.bootstrap import DISPATCHER, reads, tokens

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


@app.function_name("read_contact_projection")
@app.route(route="projections/contacts/{id}", methods=["GET"])
def read_contact_projection(req: func.HttpRequest) -> func.HttpResponse:
    return http.read_projection(req, reads())


@app.function_name("list_contact_projections")
@app.route(route="projections/contacts", methods=["GET"])
def list_contact_projections(req: func.HttpRequest) -> func.HttpResponse:
    return http.list_projections(req, reads(), tokens())


@app.function_name("project_contact_events")
@app.service_bus_topic_trigger(
    arg_name="msg",
    connection="ServiceBusConnection",
    topic_name="%SERVICEBUS_TOPIC%",
    subscription_name="%SUBSCRIBER_SUBSCRIPTION%",
    is_sessions_enabled=True,
)
def project_contact_events(msg: func.ServiceBusMessage) -> None:
    DISPATCHER.handle(msg)
