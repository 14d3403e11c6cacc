"""A part of the management API (a topic's subscriptions, their rules), as Azure's ATOM/HTTP
API answers it.

Azure serves ``ServiceBusAdministrationClient`` over HTTPS on port 443 of the namespace; the
SDK's admin client built from a connection string goes to the host *and port* of its
``Endpoint``, over HTTPS always (azure-servicebus 7.15 ignores ``UseDevelopmentEmulator`` there).
funcstack serves this API in plain HTTP on the AMQP port itself: a connection whose first bytes
are not an AMQP header is HTTP (``_connection.Connection.run``). A client reaches it with the
connection string's endpoint and the azure-core transport rewriting ``https`` to ``http`` for a
development emulator's connection string; see
docs/servicebus.md, "The management API".

Served (``api-version`` any; an ``Authorization`` header required, its key not checked, as on the
AMQP side):

* ``GET /{topic}/subscriptions?$skip&$top``: the feed of a topic's subscriptions;
* ``GET /{topic}/subscriptions/{subscription}/rules?$skip&$top``: the feed of its rules; a
  subscription created without rules has Azure's ``$Default`` (a TrueFilter);
* ``PUT /{topic}/subscriptions/{subscription}/rules/{rule}``: create a rule (a SqlFilter, a
  TrueFilter or a FalseFilter; 409 if it exists); effective for the next message sent;
* ``DELETE /{topic}/subscriptions/{subscription}/rules/{rule}``: delete one (a subscription
  without rules receives nothing, as in Azure).

Anything else answers 501 naming what funcstack does not serve (never a silent 2xx). Rules
created here live in memory: a restart reloads the entities from their Config.json.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any
from xml.sax.saxutils import escape

import h11

from funcstack.servicebus._broker import Broker, ReceiverEntity
from funcstack.servicebus._filters import (
    CORRELATION_FIELDS,
    CorrelationFilter,
    Rule,
    RuleError,
    SqlFilter,
    parse_rules,
)

logger = logging.getLogger(__name__)

_ATOM = "http://www.w3.org/2005/Atom"
_SB = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
_MAX_BODY = 256 * 1024
#: The expressions Azure gives a TrueFilter and a FalseFilter.
_TRUE, _FALSE = "1=1", "1=0"


def looks_like_http(head: bytes) -> bool:
    return head.split(b" ", 1)[0] in (b"GET", b"PUT", b"DELETE", b"POST", b"HEAD")


class _AnswerError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _sql_rule(name: str, expression: str, where: str) -> Rule:
    [rule] = parse_rules(
        [
            {
                "Name": name,
                "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expression}},
            }
        ],
        where,
    )
    return rule


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _filter_xml(rule: Rule) -> str:
    f = rule.filter
    if isinstance(f, SqlFilter):
        kind = {_TRUE: "TrueFilter", _FALSE: "FalseFilter"}.get(
            f.expression.replace(" ", ""), "SqlFilter"
        )
        return (
            f'<Filter i:type="{kind}"><SqlExpression>{escape(f.expression)}</SqlExpression>'
            "<CompatibilityLevel>20</CompatibilityLevel></Filter>"
        )
    if isinstance(f, CorrelationFilter):
        names = {name.lower(): name for name in CORRELATION_FIELDS}
        fields = "".join(f"<{names[k]}>{escape(v)}</{names[k]}>" for k, v in f.system if k in names)
        props = "".join(
            "<KeyValueOfstringanyType><Key>"
            f'{escape(k)}</Key><Value i:type="d6p1:{_xsd_type(v)}" '
            f'xmlns:d6p1="http://www.w3.org/2001/XMLSchema">{escape(_xsd_text(v))}</Value>'
            "</KeyValueOfstringanyType>"
            for k, v in f.properties
        )
        return (
            f'<Filter i:type="CorrelationFilter">{fields}<Properties>{props}</Properties></Filter>'
        )
    raise _AnswerError(500, f"rule {rule.name!r}: a filter funcstack cannot describe")


def _xsd_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "long"
    if isinstance(v, float):
        return "double"
    return "string"


def _xsd_text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _entry(base: str, path: str, title: str, content: str) -> str:
    return (
        f'<entry xmlns="{_ATOM}"><id>{escape(base + path)}</id>'
        f'<title type="text">{escape(title)}</title>'
        f"<published>{_now()}</published><updated>{_now()}</updated>"
        f'<link rel="self" href="{escape(path)}"/>'
        f'<content type="application/xml">{content}</content></entry>'
    )


def _feed(base: str, path: str, title: str, entries: list[str], next_href: str | None) -> str:
    links = f'<link rel="self" href="{escape(base + path)}"/>'
    if next_href is not None:
        links += f'<link rel="next" href="{escape(next_href)}"/>'
    return (
        f'<?xml version="1.0" encoding="utf-8"?><feed xmlns="{_ATOM}">'
        f'<title type="text">{escape(title)}</title><id>{escape(base + path)}</id>'
        f"<updated>{_now()}</updated>{links}{''.join(entries)}</feed>"
    )


def _subscription_xml(sub: ReceiverEntity) -> str:
    c = sub.config
    ttl = f"PT{int(c.default_ttl)}S" if c.default_ttl else "P10675199DT2H48M5.4775807S"
    return (
        f'<SubscriptionDescription xmlns="{_SB}" xmlns:i="{_XSI}">'
        f"<LockDuration>PT{int(c.lock_duration)}S</LockDuration>"
        f"<RequiresSession>{str(c.requires_session).lower()}</RequiresSession>"
        f"<DefaultMessageTimeToLive>{ttl}</DefaultMessageTimeToLive>"
        "<DeadLetteringOnMessageExpiration>"
        f"{str(c.dead_lettering_on_expiration).lower()}</DeadLetteringOnMessageExpiration>"
        f"<MaxDeliveryCount>{c.max_delivery_count}</MaxDeliveryCount>"
        "<Status>Active</Status></SubscriptionDescription>"
    )


def _rule_xml(rule: Rule) -> str:
    return (
        f'<RuleDescription xmlns="{_SB}" xmlns:i="{_XSI}">{_filter_xml(rule)}'
        f'<Action i:type="EmptyRuleAction"/><CreatedAt>{_now()}</CreatedAt>'
        f"<Name>{escape(rule.name)}</Name></RuleDescription>"
    )


def _rules_of(sub: ReceiverEntity) -> list[Rule]:
    """What Azure lists: an implicit ``$Default`` where the subscription declared no rule."""
    c = sub.config
    if c.rules or c.receives_nothing:
        return list(c.rules)
    return [_sql_rule("$Default", _TRUE, "$Default")]


class Management:
    """Answers one HTTP request of the management API against the broker."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def answer(
        self, method: str, target: str, host: str, body: bytes, authorized: bool
    ) -> tuple[int, str]:
        url = urllib.parse.urlsplit(target)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/") if p]
        query = urllib.parse.parse_qs(url.query)
        base = f"https://{host}/"
        if not authorized:
            raise _AnswerError(401, "no Authorization header (a SharedAccessSignature is expected)")
        lowered = [p.lower() for p in parts]
        if method == "GET" and len(parts) == 2 and lowered[1] == "subscriptions":
            topic = self._topic(parts[0])
            subs = list(topic)
            return 200, self._page(
                base,
                url.path.lstrip("/"),
                "Subscriptions",
                query,
                [
                    _entry(
                        base,
                        f"{parts[0]}/subscriptions/{s.config.name}",
                        s.config.name,
                        _subscription_xml(s),
                    )
                    for s in subs
                ],
            )
        if len(parts) >= 4 and lowered[1] == "subscriptions" and lowered[3] == "rules":
            sub = self._subscription(parts[0], parts[2])
            path = f"{parts[0]}/subscriptions/{sub.config.name}/rules"
            if method == "GET" and len(parts) == 4:
                return 200, self._page(
                    base,
                    url.path.lstrip("/"),
                    "Rules",
                    query,
                    [
                        _entry(base, f"{path}/{r.name}", r.name, _rule_xml(r))
                        for r in _rules_of(sub)
                    ],
                )
            if method == "PUT" and len(parts) == 5:
                rule = self._create_rule(sub, parts[4], body)
                return 201, _entry(base, f"{path}/{rule.name}", rule.name, _rule_xml(rule))
            if method == "DELETE" and len(parts) == 5:
                self._delete_rule(sub, parts[4])
                return 200, ""
        raise _AnswerError(
            501,
            f"{method} /{'/'.join(parts)}: funcstack's management API serves a topic's "
            "subscriptions and a subscription's rules only (docs/servicebus.md)",
        )

    def _page(
        self, base: str, path: str, title: str, query: dict[str, list[str]], entries: list[str]
    ) -> str:
        skip = int((query.get("$skip") or ["0"])[0])
        top = int((query.get("$top") or ["100"])[0])
        page = entries[skip : skip + top]
        next_href = None
        if skip + top < len(entries):
            next_href = f"{base}{path}?$skip={skip + top}&$top={top}&api-version=2021-05"
        return _feed(base, path, title, page, next_href)

    def _topic(self, name: str) -> list[ReceiverEntity]:
        sender = self.broker.sender(name)
        if sender is None or sender.config.is_queue:
            raise _AnswerError(404, f"topic {name!r} does not exist")
        return list(sender.targets)

    def _subscription(self, topic: str, name: str) -> ReceiverEntity:
        self._topic(topic)
        sub = self.broker.receiver(f"{topic}/Subscriptions/{name}")
        if sub is None:
            raise _AnswerError(404, f"subscription {topic}/{name} does not exist")
        return sub

    def _create_rule(self, sub: ReceiverEntity, name: str, body: bytes) -> Rule:
        if any(r.name.lower() == name.lower() for r in _rules_of(sub)):
            raise _AnswerError(409, f"rule {name!r} already exists")
        try:
            # a local endpoint's bounded body (_MAX_BODY); expat refuses external entities
            root = ET.fromstring(body)  # noqa: S314
        except ET.ParseError as error:
            raise _AnswerError(400, f"the body is not XML: {error}") from None
        description = root.find(f"{{{_ATOM}}}content/{{{_SB}}}RuleDescription")
        if description is None:
            raise _AnswerError(400, "the body has no RuleDescription")
        action = description.find(f"{{{_SB}}}Action")
        if action is not None and action.get(f"{{{_XSI}}}type") not in (None, "EmptyRuleAction"):
            raise _AnswerError(
                400, "rule actions are not applied by funcstack: create it without one"
            )
        f = description.find(f"{{{_SB}}}Filter")
        kind = f.get(f"{{{_XSI}}}type") if f is not None else "TrueFilter"
        if kind in ("TrueFilter", "FalseFilter"):
            expression = _TRUE if kind == "TrueFilter" else _FALSE
        elif kind == "SqlFilter" and f is not None:
            expression = f.findtext(f"{{{_SB}}}SqlExpression") or ""
        else:
            raise _AnswerError(
                400,
                f"a {kind} rule is not created through funcstack's management API: declare "
                "it in the entities' Config.json",
            )
        where = f"subscription {sub.config.name!r}, rule {name!r}"
        try:
            rule = _sql_rule(name, expression, where)
        except RuleError as error:
            raise _AnswerError(400, str(error)) from None
        sub.config.rules = [*_rules_of(sub), rule]
        sub.config.receives_nothing = False
        logger.info("%s: created (%s)", where, expression)
        return rule

    def _delete_rule(self, sub: ReceiverEntity, name: str) -> None:
        rules = _rules_of(sub)
        kept = [r for r in rules if r.name.lower() != name.lower()]
        if len(kept) == len(rules):
            raise _AnswerError(404, f"rule {name!r} does not exist")
        sub.config.rules = kept
        sub.config.receives_nothing = not kept
        logger.info("subscription %r, rule %r: deleted", sub.config.name, name)


async def serve(
    broker: Broker, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """HTTP/1.1 (keep-alive) on a connection whose first bytes, ``head``, were an HTTP request's;
    a request that is not HTTP/1.1 closes it."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_BODY)
    conn.receive_data(head)
    try:
        await _serve(conn, Management(broker), reader, writer)
    except h11.ProtocolError as error:
        logger.info("management API: a request that is not HTTP/1.1 (%s): closed", error)


async def _serve(
    conn: h11.Connection,
    management: Management,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    while True:
        request: h11.Request | None = None
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data and (conn.their_state is h11.IDLE or request is None):
                    return
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += bytes(event.data)
                if len(body) > _MAX_BODY:
                    return
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return
        assert request is not None
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        try:
            status, text = management.answer(
                request.method.decode(),
                request.target.decode(),
                headers.get("host", "localhost"),
                body,
                "authorization" in headers,
            )
        except _AnswerError as answer:
            status, text = (
                answer.status,
                (
                    f"<Error><Code>{answer.status}</Code><Detail>{escape(answer.detail)}</Detail></Error>"
                ),
            )
        payload = text.encode()
        content_type = (
            "application/atom+xml;type=entry;charset=utf-8"
            if status < 300
            else "application/xml; charset=utf-8"
        )
        out = (
            conn.send(
                h11.Response(
                    status_code=status,
                    reason=HTTPStatus(status).phrase,
                    headers=[("Content-Type", content_type), ("Content-Length", str(len(payload)))],
                )
            )
            or b""
        )
        out += conn.send(h11.Data(data=payload)) if payload else b""
        out += conn.send(h11.EndOfMessage()) or b""
        writer.write(out)
        await writer.drain()
        if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
            return
        conn.start_next_cycle()
