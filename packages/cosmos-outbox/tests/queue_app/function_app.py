"""A queue-triggered function on the outbox's transaction, as an app writes one (async), with the
relay beside it, for the package's test that holds it to a local Functions host, a real Azurite
queue and the Service Bus topic (test_queue_trigger_hosted.py, through funcstack): each command
on the queue `%COMMANDS_QUEUE%` books seats and publishes `BookingImported` in one commit; a
command that is not valid raises, so the host retries it and then moves it to
`<queue>-poison` (host.json: maxDequeueCount 2)."""

from __future__ import annotations

import azure.functions as func
from pydantic import BaseModel, ConfigDict, Field

from cosmos_outbox.aio import Outbox

outbox = Outbox()  # its container and topic from the app settings, read on first use
app = func.FunctionApp()
app.register_functions(outbox.relay_blueprint())


class ImportBooking(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    customer_id: str = Field(alias="customerId", min_length=1)
    booking_id: str = Field(alias="bookingId", min_length=1)
    seats: int = Field(gt=0, le=10)


@app.queue_trigger(arg_name="msg", queue_name="%COMMANDS_QUEUE%", connection="AzureWebJobsStorage")
async def import_booking(msg: func.QueueMessage) -> None:
    command = ImportBooking.model_validate_json(msg.get_body())  # invalid: raises, retried
    async with outbox.transaction(command.customer_id, entity="customer") as tx:
        tx.create(
            {
                "id": command.booking_id,
                "partitionKey": command.customer_id,
                "type": "booking",
                "seats": command.seats,
            }
        )
        tx.publish("BookingImported", {"bookingId": command.booking_id, "seats": command.seats})
        await tx.commit()  # a failure raises: retried, then poisoned
