"""The Concerts HTTP API: a FastAPI app of the team's own, its documents (a concert, its tickets)
kept in one partition per concert, written through the outbox's transaction so that
each change and the event that tells of it commit together.

- `POST /api/concerts` `{name, capacity}`: 201, the concert; publishes `ConcertAnnounced`;
- `GET /api/concerts/{id}`: the concert (tickets sold, capacity);
- `POST /api/concerts/{id}/tickets` `{buyer, quantity}`: 201, the ticket; 409 when sold out;
  publishes `TicketsSold`; an `Idempotency-Key` makes a retry answer the same ticket;
- `GET /api/concerts/{id}/tickets/{ticket_id}`: a ticket.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from concerts.outbox import outbox, read
from cosmos_outbox import IdempotencyKeyReusedError, PreconditionFailedError

api = FastAPI(title="Concerts", version="1.0")
#: How often a purchase is tried again when another one changed the concert first.
ATTEMPTS = 5


class NewConcert(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    capacity: Annotated[int, Field(gt=0, le=100_000)]


class TicketOrder(BaseModel):
    buyer: Annotated[str, Field(min_length=1, max_length=100)]
    quantity: Annotated[int, Field(gt=0, le=10)]


def concert_view(concert: dict[str, Any]) -> dict[str, Any]:
    return {k: concert[k] for k in ("id", "name", "capacity", "sold")}


def ticket_view(ticket: dict[str, Any]) -> dict[str, Any]:
    return {k: ticket[k] for k in ("id", "concertId", "buyer", "quantity", "status")}


@api.exception_handler(IdempotencyKeyReusedError)
async def key_reused(request: Request, exc: IdempotencyKeyReusedError) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=422)


@api.post("/api/concerts", status_code=201)
async def announce(body: NewConcert) -> dict[str, Any]:
    concert_id = str(uuid.uuid4())
    concert = {
        "id": concert_id,
        "partitionKey": concert_id,
        "type": "concert",
        "name": body.name,
        "capacity": body.capacity,
        "sold": 0,
    }
    tx = outbox.transaction(concert_id, entity="concert")
    tx.create(concert)
    tx.publish("ConcertAnnounced", {"name": body.name, "capacity": body.capacity})
    await tx.commit()
    return concert_view(concert)


@api.get("/api/concerts/{concert_id}")
async def read_concert(concert_id: str) -> dict[str, Any]:
    concert = await read(concert_id, concert_id)
    if concert is None or concert.get("type") != "concert":
        raise HTTPException(404, "no such concert")
    return concert_view(concert)


@api.post("/api/concerts/{concert_id}/tickets", status_code=201)
async def buy(
    concert_id: str, order: TicketOrder, idempotency_key: Annotated[str | None, Header()] = None
) -> dict[str, Any]:
    for _ in range(ATTEMPTS):
        concert = await read(concert_id, concert_id)
        if concert is None or concert.get("type") != "concert":
            raise HTTPException(404, "no such concert")
        if concert["sold"] + order.quantity > concert["capacity"]:
            raise HTTPException(409, "sold out")
        ticket = {
            "id": str(uuid.uuid4()),
            "partitionKey": concert_id,
            "type": "ticket",
            "concertId": concert_id,
            "buyer": order.buyer,
            "quantity": order.quantity,
            "status": "sold",
        }
        sold = [{"op": "incr", "path": "/sold", "value": order.quantity}]
        tx = outbox.transaction(concert_id, entity="concert")
        tx.patch(concert_id, sold, if_match=concert["_etag"])
        tx.create(ticket)
        tx.publish("TicketsSold", {"ticketId": ticket["id"], "quantity": order.quantity})
        if idempotency_key:
            tx.remember(idempotency_key, request=order.model_dump(), answer=ticket_view(ticket))
        try:
            committed = await tx.commit()
        except PreconditionFailedError:
            continue  # another purchase changed the concert first: read it again
        return committed.answer if committed.replayed else ticket_view(ticket)
    raise HTTPException(503, "too many purchases at once; retry")


@api.get("/api/concerts/{concert_id}/tickets/{ticket_id}")
async def read_ticket(concert_id: str, ticket_id: str) -> dict[str, Any]:
    ticket = await read(concert_id, ticket_id)
    if ticket is None or ticket.get("type") != "ticket":
        raise HTTPException(404, "no such ticket")
    return ticket_view(ticket)
