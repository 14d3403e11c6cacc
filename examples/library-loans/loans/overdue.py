"""The hourly timer (OVERDUE_SCHEDULE): every open loan past its due date, across members, is
marked overdue (conditioned on the etag it was read with: a loan returned meanwhile stays as
it is)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import azure.functions as func

from cosmos_outbox import PreconditionFailedError
from loans.app import plain
from loans.outbox import outbox, query

logger = logging.getLogger(__name__)
overdue = func.Blueprint()  # type: ignore[no-untyped-call]  # untyped in azure-functions
OVERDUE = "SELECT * FROM c WHERE c.status = 'open' AND c.dueAt < @now"


@overdue.timer_trigger(arg_name="timer", schedule="%OVERDUE_SCHEDULE%")
async def mark_overdue(timer: func.TimerRequest) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for loan in await query(OVERDUE, [{"name": "@now", "value": now}]):
        tx = outbox.transaction(loan["memberId"], entity="member")
        tx.replace({**plain(loan), "status": "overdue"}, if_match=loan["_etag"])
        tx.publish("LoanOverdue", {"loanId": loan["id"], "dueAt": loan["dueAt"]})
        try:
            await tx.commit()
        except PreconditionFailedError:
            logger.info("loan %s changed since it was read: left as it is", loan["id"])
