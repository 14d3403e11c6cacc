"""The OpenAPI document declares the Idempotency-Key header and its 422 on writes only, the
operators' routes included (moved from the core's http_api/test_idempotency.py)."""

from __future__ import annotations

from conftest import TicketWorld, body

from cosmos_outbox.http import KEY_PATTERN

KEY = "Idempotency-Key"


def test_the_openapi_document_declares_the_header_and_422_on_writes_only(
    world: TicketWorld,
) -> None:
    document = body(world.client.request("GET", "openapi.json"))
    for path, method in (
        ("/tickets", "post"),
        ("/tickets/{id}", "patch"),
        ("/tickets/{id}/close", "post"),
    ):
        operation = document["paths"][path][method]
        [header] = [p for p in operation["parameters"] if p["name"] == KEY]
        assert header["in"] == "header" and "required" not in header
        assert header["schema"]["pattern"] == KEY_PATTERN
        assert "422" in operation["responses"]
    read = document["paths"]["/tickets/{id}"]["get"]
    assert KEY not in {p["name"] for p in read.get("parameters", [])}
    assert "422" not in read["responses"]
    assert "422" not in document["paths"]["/outbox/redrive"]["post"]["responses"]
