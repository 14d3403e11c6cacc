"""The library's HTTP API: a FastAPI app of the team's own. A member's documents (their loans and
their quota, `{"id": "quota", "open": n}`) are kept in the member's partition (`/memberId`); a
borrow writes the loan and the quota, conditioned on the quota's etag, in one batch.

- `POST /api/members/{memberId}/loans` `{bookId}`: 201, the loan (due in LOAN_DAYS days); 409
  when the member has LOAN_LIMIT loans open; publishes `BookBorrowed`; an `Idempotency-Key`
  makes a retry answer the first answer (422 for the key with another body);
- `GET /api/members/{memberId}/loans`: the member's loans, by due date.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from cosmos_outbox import AlreadyExistsError, IdempotencyKeyReusedError, PreconditionFailedError
from loans.outbox import outbox, query, read

api = FastAPI(title="Library loans", version="1.0")
#: How often a borrow is tried again when another change of the member's quota came first.
ATTEMPTS = 5
MEMBER_LOANS = "SELECT * FROM c WHERE c.type = 'loan' ORDER BY c.dueAt"


class Borrow(BaseModel):
    bookId: Annotated[str, Field(min_length=1, max_length=64)]  # noqa: N815 (the wire's name)


def loan_view(loan: dict[str, Any]) -> dict[str, Any]:
    return {k: loan[k] for k in ("id", "memberId", "bookId", "status", "dueAt")}


def plain(document: dict[str, Any]) -> dict[str, Any]:
    """A document as written: without the store's own properties (`_etag`, `_ts`, ...)."""
    return {k: v for k, v in document.items() if not k.startswith("_")}


def due_at(days: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


@api.exception_handler(IdempotencyKeyReusedError)
async def key_reused(request: Request, exc: IdempotencyKeyReusedError) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=422)


@api.post("/api/members/{member_id}/loans", status_code=201)
async def borrow(
    member_id: str, body: Borrow, idempotency_key: Annotated[str | None, Header()] = None
) -> dict[str, Any]:
    for _ in range(ATTEMPTS):
        tx = outbox.transaction(member_id, entity="member")
        if idempotency_key:  # first: a retry gets the first answer, whatever the quota says now
            replayed = await tx.replay(idempotency_key, request=body.model_dump())
            if replayed is not None:
                first: dict[str, Any] = replayed.answer
                return first
        quota = await read(member_id, "quota")
        if quota is not None and quota["open"] >= int(os.environ.get("LOAN_LIMIT", "2")):
            raise HTTPException(409, "loan quota exhausted")
        loan = {
            "id": str(uuid.uuid4()),
            "memberId": member_id,
            "type": "loan",
            "bookId": body.bookId,
            "status": "open",
            "dueAt": due_at(int(os.environ.get("LOAN_DAYS", "14"))),
        }
        counted = {"id": "quota", "memberId": member_id, "type": "quota", "open": 1}
        if quota is None:
            tx.create(counted)
        else:
            counted = {**plain(quota), "open": quota["open"] + 1}
            tx.replace(counted, if_match=quota["_etag"])
        tx.create(loan)
        tx.publish(
            "BookBorrowed", {"loanId": loan["id"], "bookId": body.bookId, "dueAt": loan["dueAt"]}
        )
        if idempotency_key:
            tx.remember(idempotency_key, request=body.model_dump(), answer=loan_view(loan))
        try:
            committed = await tx.commit()
        except (PreconditionFailedError, AlreadyExistsError):
            continue  # another borrow changed the quota first: read it again
        return committed.answer if committed.replayed else loan_view(loan)
    raise HTTPException(503, "too many borrows at once; retry")


@api.get("/api/members/{member_id}/loans")
async def loans_of(member_id: str) -> list[dict[str, Any]]:
    return [loan_view(loan) for loan in await query(MEMBER_LOANS, member_id=member_id)]
