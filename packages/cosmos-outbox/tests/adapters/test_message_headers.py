"""A message's headers are copied as one (`headers_of`): a resubmission or a notice (an
`Outgoing`) goes out as the SDK's message with every one of them, as it was given."""

from __future__ import annotations

from cosmos_outbox._mapper.message import headers_of
from cosmos_outbox.ports import Outgoing
from cosmos_outbox.servicebus._messages import message_of


def test_an_outgoing_goes_out_with_every_header_it_was_given() -> None:
    sent = Outgoing(
        body=b"{}",
        message_id="m-1",
        session_id="Ticket-7",
        subject="TicketOpened",
        content_type="application/json",
        application_properties={"cloudEvents_id": "e-1"},
        correlation_id="c-1",
    )
    message = message_of(sent)
    assert (
        message.message_id,
        message.session_id,
        message.subject,
        message.content_type,
        message.correlation_id,
    ) == ("m-1", "Ticket-7", "TicketOpened", "application/json", "c-1")
    assert b"".join(message.body) == b"{}"
    assert message.application_properties == {"cloudEvents_id": "e-1"}
    assert set(headers_of(sent)) == {
        "message_id",
        "session_id",
        "subject",
        "content_type",
        "correlation_id",
    }
