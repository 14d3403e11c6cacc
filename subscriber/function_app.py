"""The subscriber app: contact events from its own session-enabled subscription into a
projection (contacts_projection), and the projection read over HTTP (`GET
/api/projections/contacts/{id}` and a paged list; a function key in Azure, none locally).
Bindings only; the work is in `contacts_projection`.

One session = one contact: the host hands a contact's events over one at a time, in order.
Success completes the message; an exception abandons it (redelivered, then dead-lettered after
the subscription's MaxDeliveryCount). Only a message that is not an outbox event at all fails:
an action this subscriber does not handle, or an event of another aggregate type (its
subscription filters on `aggregateType`, so one arrives only if that filter is missing), is
recorded and acknowledged, so a new event type never stalls a contact's session.
"""

from __future__ import annotations

import logging

import azure.functions as func
from contacts_projection import http, telemetry
from contacts_projection.bootstrap import projector, reads, tokens
from contacts_projection.events import CONTACT, from_message
from contacts_projection.projection import IGNORED_ACTIONS
from contacts_projection.store import Outcome

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
logger = logging.getLogger("subscriber")


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
    event = from_message(
        msg.get_body(),
        content_type=msg.content_type,
        application_properties=msg.application_properties,
    )
    fields = {"eventId": event.event_id, "aggregateType": event.aggregate_type,
              "aggregateId": event.contact_id, "action": event.type, "version": event.version,
              "deliveryCount": msg.delivery_count}
    if event.aggregate_type != CONTACT:
        telemetry.ignored(event.type, "other aggregate type", event.aggregate_type)
        logger.warning(
            "event %s of %s %s ignored: this subscriber projects contacts (is the "
            "subscription's aggregateType filter missing?)", event.event_id,
            event.aggregate_type, event.contact_id,
            extra={**fields, "outcome": "ignored", "reason": "other aggregate type"})
        return
    result = projector().handle(event)
    if result.outcome is Outcome.IGNORED:
        reason = "ignored action" if event.type in IGNORED_ACTIONS else "unknown action"
        telemetry.ignored(event.type, reason, event.aggregate_type)
        logger.log(
            logging.INFO if reason == "ignored action" else logging.WARNING,
            "event %s (contact %s, version %d): action %s is not projected (%s); its version "
            "is taken as applied", event.event_id, event.contact_id, event.version, event.type,
            reason, extra={**fields, "outcome": result.outcome.value, "reason": reason})
        return
    logger.info(
        "event %s (contact %s, version %d, delivery %s): %s",
        event.event_id, event.contact_id, event.version, msg.delivery_count,
        result.outcome.value,
        extra={"eventId": event.event_id, "contactId": event.contact_id,
               "version": event.version, "deliveryCount": msg.delivery_count,
               "outcome": result.outcome.value, "applied": result.applied},
    )
