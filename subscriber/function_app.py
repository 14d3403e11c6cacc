"""The subscriber app: contact events from its own session-enabled subscription into a
projection (contacts_projection). Bindings only; the work is in `contacts_projection`.

One session = one contact: the host hands a contact's events over one at a time, in order.
Success completes the message; an exception abandons it (redelivered, then dead-lettered after
the subscription's MaxDeliveryCount).
"""

from __future__ import annotations

import logging

import azure.functions as func
from contacts_projection.bootstrap import projector
from contacts_projection.events import from_message

app = func.FunctionApp()
logger = logging.getLogger("subscriber")


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
    result = projector().handle(event)
    logger.info(
        "event %s (contact %s, version %d, delivery %s): %s",
        event.event_id, event.contact_id, event.version, msg.delivery_count,
        result.outcome.value,
        extra={"eventId": event.event_id, "contactId": event.contact_id,
               "version": event.version, "deliveryCount": msg.delivery_count,
               "outcome": result.outcome.value, "applied": result.applied},
    )
