"""``$cbs`` and ``$management``: the request-response operations of the local Service Bus
endpoint, one request message in, one response message out on the client's reply link.

``$cbs`` put-token is accepted for any token whose audience names an entity that exists.
``$management`` serves renew-lock, update-disposition (complete, abandon, dead-letter, defer by
lock token), renew-session-lock, get/set-session-state, peek-message,
receive-by-sequence-number, get-message-sessions, schedule-message and
cancel-scheduled-message; another operation answers 501. Follows "AMQP 1.0 in Azure Service Bus:
request-response-based operations" (learn.microsoft.com: each operation's request and response
maps, status codes and error conditions) and "Claims-based authorization" (put-token).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from proton import Data

from funcstack.servicebus._amqp import (
    array_of,
    described,
    encode,
    fields,
    int32,
    named,
    performative,
    sections,
    symbol,
    text,
    timestamp,
)
from funcstack.servicebus._broker import (
    SCHEDULED_ENQUEUE_TIME,
    Broker,
    ReceiverEntity,
    now_ms,
)
from funcstack.servicebus._codec import encode_stored, parse_message
from funcstack.servicebus._connection import (
    COND_ARGUMENT_ERROR,
    COND_LOCK_LOST,
    COND_MESSAGE_NOT_FOUND,
    COND_NOT_ALLOWED,
    COND_NOT_FOUND,
    COND_SESSION_LOCK_LOST,
    Link,
    entity_path,
)
from funcstack.servicebus._limits import COND_INTERNAL, RefusedError

logger = logging.getLogger(__name__)

DATETIME_MAX_MS = 253402300800000  # .NET DateTime.MaxValue: "no filter" in get-message-sessions

#: An operation's answer: status code, description, body (None: none), error condition.
Answer = tuple[int, str, Any, str | None]


class Management:
    """The request-response operations on the namespace's entities."""

    def __init__(self, broker: Broker, *, persist: Callable[[], None] = lambda: None) -> None:
        self.broker = broker
        #: Writes what an operation changed, before its answer goes (``Server.persist``).
        self._persist = persist

    def handle(self, link: Link, payload: bytes) -> None:
        """Answer one request that arrived on ``link`` (``$cbs`` or an entity's ``$management``)."""
        app: dict[str, Any] = {}
        message_id: Any = None
        body: dict[str, Any] = {}
        for code, _, value in sections(payload, bodies=True):
            if code == 0x73:  # properties: the answer's correlation-id is the request's id
                message_id = fields(value, 13)[0]
            elif code == 0x74:
                app = named(value)
            elif code == 0x77:  # amqp-value: the request's map
                body = named(value)
        if link.kind == "cbs-in":
            response_app: dict[str, Any] = self._put_token(app)
            answer: Any = None
        else:
            try:
                status, description, answer, condition = self._management_op(link, app, body)
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                # a request missing an entry or with one of the wrong type: the service answers
                # 400; the link and the connection go on
                status, answer, condition = 400, None, COND_ARGUMENT_ERROR
                description = f"The management request is malformed: {type(exc).__name__} {exc}"
                logger.warning(
                    "refused a malformed $management request on %s: %s", link.address, description
                )
            response_app = {"statusCode": int32(status), "statusDescription": description}
            if condition is not None:
                response_app["errorCondition"] = symbol(condition)
        self._persist()  # durable before the answer goes
        reply_link = None
        for candidate in link.session.links.values():
            if candidate.kind in ("cbs-out", "mgmt-out") and entity_path(
                candidate.address
            ).lower() == (entity_path(link.address).lower()):
                reply_link = candidate
        if reply_link is None:
            return
        response = encode(performative(0x73, None, None, None, None, None, message_id)) + encode(
            described(0x74, response_app)
        )
        if answer is not None:
            response += encode(described(0x77, answer))
        link.session.conn.send_transfer(
            reply_link, response, tag=uuid.uuid4().bytes_le, settled=True
        )

    def _put_token(self, app: dict[str, Any]) -> dict[str, Any]:
        """$cbs put-token: any token is accepted (keys are not checked locally), but the
        service refuses a token whose audience names an entity that does not exist — the
        client's open fails with an authentication error before any link is attached."""
        audience = text(app.get("name")) or ""
        path = audience.split("://", 1)[-1].partition("/")[2].strip("/")
        for suffix in ("$management", "$deadletterqueue"):
            if path.lower().endswith(suffix):
                path = path[: -len(suffix)].rstrip("/")
        if path and self.broker.sender(path) is None and self.broker.receiver(path) is None:
            return {
                "status-code": int32(404),
                "status-description": f"The messaging entity '{path}' could not be found.",
            }
        return {"status-code": int32(202), "status-description": "Accepted"}

    def _schedule_op(self, op: str, path: str, body: dict[str, Any]) -> Answer:
        """schedule-message / cancel-scheduled-message on a queue's or topic's $management."""
        sender = self.broker.sender(path)
        if sender is None:
            return 404, f"The messaging entity '{path}' could not be found.", None, COND_NOT_FOUND
        if op == "cancel-scheduled-message":
            for seq in body.get("sequence-numbers") or []:
                sender.cancel(int(seq))  # the service ignores numbers it does not know
            return 200, "OK", None, None
        messages = []
        for n, entry in enumerate(body.get("messages") or [], 1):
            try:
                m = parse_message(bytes(named(entry)["message"]), label=f"scheduled message {n}")
            except RefusedError as refused:
                status = 500 if refused.condition == COND_INTERNAL else 400
                return status, refused.description, None, refused.condition
            if sender.requires_session and m.session_id is None:
                return (
                    400,
                    "The SessionId was not set on a message, and it cannot be sent to the entity.",
                    None,
                    COND_NOT_ALLOWED,
                )
            messages.append(m)
        numbers = []
        for m in messages:
            due = m.annotations.get(SCHEDULED_ENQUEUE_TIME)
            if not isinstance(due, int):
                return 400, "The message has no scheduled enqueue time.", None, COND_NOT_ALLOWED
            if sender.is_duplicate(m.message_id):
                numbers.append(0)
                continue
            numbers.append(sender.schedule(m, max(due, now_ms())))
        return (
            200,
            "OK",
            {"sequence-numbers": array_of(Data.LONG, numbers)},
            None,
        )

    def _management_op(self, link: Link, app: dict[str, Any], body: dict[str, Any]) -> Answer:
        operation = text(app.get("operation")) or ""
        path = entity_path(link.address)
        path = path[: -len("$management")].rstrip("/")
        op = operation.removeprefix("com.microsoft:")
        if op in ("schedule-message", "cancel-scheduled-message"):
            return self._schedule_op(op, path, body)
        entity = self.broker.receiver(path)
        if entity is None:
            return 404, f"The messaging entity '{path}' could not be found.", None, COND_NOT_FOUND
        if op in ("renew-session-lock", "get-session-state", "set-session-state"):
            return self._session_op(op, entity, body)
        answer = {
            "renew-lock": self._renew_lock,
            "update-disposition": self._update_disposition,
            "peek-message": self._peek,
            "receive-by-sequence-number": self._receive_deferred,
            "get-message-sessions": self._message_sessions,
        }.get(op)
        if answer is None:
            return (
                501,
                f"Operation {operation} is not supported by the local endpoint.",
                None,
                "amqp:not-implemented",
            )
        return answer(entity, link, body)

    def _renew_lock(self, entity: ReceiverEntity, link: Link, body: dict[str, Any]) -> Answer:
        expirations = []
        for token in body.get("lock-tokens") or []:
            m = entity.by_lock(token)
            if m is None:
                return 410, "The lock supplied is invalid.", None, COND_LOCK_LOST
            m.locked_until_ms = now_ms() + int(entity.config.lock_duration * 1000)
            self.broker.touch(entity, m.seq)
            expirations.append(timestamp(m.locked_until_ms))
        return 200, "OK", {"expirations": expirations}, None

    def _update_disposition(
        self, entity: ReceiverEntity, link: Link, body: dict[str, Any]
    ) -> Answer:
        status = text(body.get("disposition-status"))
        for token in body.get("lock-tokens") or []:
            m = entity.by_lock(token)
            if m is None:
                return 410, "The lock supplied is invalid.", None, COND_LOCK_LOST
            if status == "completed":
                entity.complete(m)
            elif status == "abandoned":
                entity.release(m, count=True)
            elif status == "suspended":
                entity.dead_letter_message(
                    m,
                    reason=text(body.get("deadletter-reason")),
                    description=text(body.get("deadletter-description")),
                )
            elif status == "defered":
                entity.defer(m)
        return 200, "OK", None, None

    def _session_op(self, op: str, entity: ReceiverEntity, body: dict[str, Any]) -> Answer:
        """renew-session-lock, get-session-state, set-session-state: of a session locked to
        a receiver."""
        sid = text(body.get("session-id")) or ""
        if entity.session_owners.get(sid) is None:
            return 410, "The session lock was lost.", None, COND_SESSION_LOCK_LOST
        if op == "renew-session-lock":
            expiry = entity.renew_session(sid) or now_ms()
            return 200, "OK", {"expiration": timestamp(expiry)}, None
        if op == "get-session-state":
            return 200, "OK", {"session-state": entity.session_state.get(sid)}, None
        state = body.get("session-state")
        entity.session_state[sid] = bytes(state) if state is not None else None
        entity.session_updated_ms[sid] = now_ms()
        self.broker.touch_session(entity, sid)
        return 200, "OK", None, None

    def _peek(self, entity: ReceiverEntity, link: Link, body: dict[str, Any]) -> Answer:
        start = int(body.get("from-sequence-number") or 0)
        count = int(body.get("message-count") or 1)
        peek_sid = text(body.get("session-id"))
        found = [
            m
            for m in entity.messages.values()
            if m.seq >= start and (peek_sid is None or m.session_id == peek_sid)
        ][:count]
        if not found:
            return 204, "No messages", None, None
        return (
            200,
            "OK",
            {"messages": [{"message": encode_stored(m, locked=False)} for m in found]},
            None,
        )

    def _receive_deferred(self, entity: ReceiverEntity, link: Link, body: dict[str, Any]) -> Answer:
        """receive-by-sequence-number: deferred messages, locked by ``link``'s receiver (or,
        receive-and-delete, gone now)."""
        out: list[dict[str, Any]] = []
        # receiver-settle-mode 0: a receive-and-delete receiver, the messages go now
        delete = body.get("receiver-settle-mode") == 0
        for seq in body.get("sequence-numbers") or []:
            m = entity.messages.get(int(seq))
            if m is None or not m.deferred:
                return 404, f"Message {seq} not found.", None, COND_MESSAGE_NOT_FOUND
            if delete:
                entity.messages.pop(m.seq)
                self.broker.touch(entity, m.seq)
                self.broker.changed()
                out.append({"message": encode_stored(m, locked=False)})
                continue
            # locked by this receiver; still deferred, so out of normal receives
            m.owner = link
            m.lock_token = uuid.uuid4()
            m.locked_until_ms = now_ms() + int(entity.config.lock_duration * 1000)
            self.broker.locks[m.lock_token] = (entity, m.seq)
            self.broker.touch(entity, m.seq)
            out.append({"message": encode_stored(m, locked=True), "lock-token": m.lock_token})
        return 200, "OK", {"messages": out}, None

    def _message_sessions(self, entity: ReceiverEntity, link: Link, body: dict[str, Any]) -> Answer:
        since = body.get("last-updated-time")
        if isinstance(since, int) and since < DATETIME_MAX_MS:
            # a filter (DateTime.MaxValue means none): sessions whose state was set after
            sessions = sorted(sid for sid, at in entity.session_updated_ms.items() if at > since)
            return 200, "OK", {"sessions-ids": sessions, "skip": 0}, None
        sessions = sorted({m.session_id for m in entity.messages.values() if m.session_id})
        return 200, "OK", {"sessions-ids": sessions, "skip": 0}, None
