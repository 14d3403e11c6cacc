"""Hostile input at the operators' routes too: no header value or body gives a 5xx (moved
from the core's http_api/test_hostile_input.py)."""

from __future__ import annotations

from conftest import TicketWorld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    max_examples=60,
)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "if-match",
                "if-none-match",
                "etag",
                "content-type",
                "traceparent",
                "idempotency-key",
                "x-continuation-token",
            ]
        ),
        st.text(max_size=30),
        max_size=4,
    ),
    st.binary(max_size=60),
)
def test_no_header_value_or_body_gives_a_5xx(
    world: TicketWorld, headers: dict[str, str], raw: bytes
) -> None:
    client = world.client
    for response in (
        client.request("POST", "tickets", raw=raw, headers=headers),
        client.request("PATCH", "tickets/x1", raw=raw, headers=headers),
        client.request("POST", "tickets/x1/close", raw=raw, headers=headers),
        client.request("GET", "tickets/x1", headers=headers),
        client.request("GET", "outbox/quarantine", headers=headers),
        client.request("POST", "outbox/redrive", raw=raw, headers=headers),
    ):
        assert response.status_code < 500, response.get_body()
