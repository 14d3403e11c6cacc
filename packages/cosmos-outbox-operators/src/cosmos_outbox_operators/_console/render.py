"""The console's HTML: Jinja2 templates (autoescaped: every value an operator or an event put there
is text, never markup) and the backlog chart, imported on the first request that renders, never
when the app is indexed (tests/operators/test_console.py measures the start)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from functools import cache
from typing import Any
from urllib.parse import quote, urlencode

import azure.functions as func
import jinja2
from markupsafe import Markup

from cosmos_outbox.operations import BULK_KINDS, trace_id
from cosmos_outbox_operators._types import AGGREGATE_TYPE_PATTERN

__all__ = ["TRACE_URL_SETTING", "fragment", "page", "template_name"]

#: An app setting: the link to open a trace in Application Insights, `{traceId}` replaced by the
#: event's trace id (the Bicep sets it to the Logs of the app's Application Insights resource).
TRACE_URL_SETTING = "OUTBOX_CONSOLE_TRACE_URL"
#: A body longer than this is shortened on the page, with a way to show it whole.
BODY_SHOWN_CHARACTERS = 4000
#: The fragments answers of one kind share, by the name of the model a route declares it answers
#: with (or a model it subclasses): every route that answers a bulk operation renders
#: `_operation`, whatever its name, with nothing to register here.
_SHARED = {
    "Operation": "_operation",
    "GroupOutcome": "_group_outcome",
    "ActionReport": "_dead_letter_action",
    "LetterPreview": "_letter_preview",
    "FailureActed": "_failure_acted",
}


def template_name(operation: str, answers: type | None) -> str:
    """The fragment of `operation`'s answer: `fragments/<operation>.html` when there is one,
    else the one shared by the kind of answer it declares (`answers`, its response model), else
    the answer shown as JSON (`answer.html`)."""
    environment = _environment()
    own = f"fragments/{operation}.html"
    if own in _templates(environment):
        return own
    for kind in getattr(answers, "__mro__", ()):
        if kind.__name__ in _SHARED:
            return f"fragments/{_SHARED[kind.__name__]}.html"
    return "fragments/answer.html"


@cache
def _templates(environment: jinja2.Environment) -> frozenset[str]:
    return frozenset(environment.list_templates())


@cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("cosmos_outbox_operators._console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        age=age,
        since=since,
        since_or_in=since_or_in,
        pretty=pretty,
        pretty_text=pretty_text,
        kilobytes=lambda n: f"{n / 1024:.1f} KB",
        urlpart=lambda s: quote(str(s), safe=""),
        trace_id=trace_id,
        epoch=lambda ts: datetime.fromtimestamp(float(ts), UTC).isoformat().replace("+00:00", "Z"),
    )
    environment.globals.update(
        trace_url=trace_url,
        chart=chart,
        selection=selection,
        query_string=query_string,
        aggregate_type_pattern=AGGREGATE_TYPE_PATTERN,
        outcomes={kind: spec.outcome for kind, spec in BULK_KINDS.items()},
        canary=BULK_KINDS.canary,
    )
    return environment


def fragment(
    operation: str,
    *,
    answer: Any,
    status: int,
    request: func.HttpRequest,
    base: str,
    answers: type | None = None,
) -> str:
    """The HTML fragment of `operation`'s answer (`template_name`: its own, or the one its kind
    of answer, `answers`, shares, else the answer shown as JSON)."""
    template = _environment().get_template(template_name(operation, answers))
    return template.render(
        operation=operation,
        answer=answer,
        status=status,
        route=dict(request.route_params),
        query=dict(request.params),
        sent=_sent(request),
        base=base,
        body_shown=BODY_SHOWN_CHARACTERS,
    )


def _sent(request: func.HttpRequest) -> dict[str, Any]:
    """The JSON object the request sent (the route parsed and accepted it: this fragment is its
    answer), for an answer's "continue" to send again with the next token; {} when none."""
    body = request.get_body()
    if not body:
        return {}
    try:
        value = json.loads(body)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def page(template: str, **values: Any) -> str:
    return _environment().get_template(template).render(**values)


def age(seconds: float | None) -> str:
    """A duration as on call reads it: "42 s", "3 min 5 s", "2 h 10 min", "3 d 4 h"."""
    if seconds is None:
        return "-"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def _seconds_ago(instant: str) -> float | None:
    """How long ago an RFC 3339 instant was, in seconds (negative: ahead); None when it is not
    one."""
    try:
        at = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (datetime.now(UTC) - at).total_seconds()


def since(instant: str | None) -> str:
    """How long ago an RFC 3339 instant was ("-" when there is none)."""
    ago = _seconds_ago(instant) if instant else None
    return age(ago) if ago is not None else instant or "-"


def since_or_in(instant: str | None) -> str:
    """An instant that may be ahead (a scheduled event's due time): "in 4 min 10 s" or
    "4 min 10 s ago" ("-" when there is none)."""
    ago = _seconds_ago(instant) if instant else None
    if ago is None:
        return instant or "-"
    return f"in {age(-ago)}" if ago < 0 else f"{age(ago)} ago"


def pretty(value: Any) -> str:
    """A JSON value, indented (a string body as it is)."""
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def pretty_text(text: str) -> str:
    """A message's body: indented when it is JSON, else as it is."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def trace_url(trace: str | None) -> str | None:
    """The link to trace id `trace` in Application Insights, when the app setting names one."""
    template = os.environ.get(TRACE_URL_SETTING, "")
    if not trace or "{traceId}" not in template:
        return None
    return template.replace("{traceId}", quote(trace, safe=""))


def selection(query: dict[str, str]) -> dict[str, Any]:
    """The dead letters a listing shows, as the resubmit and discard routes name them: its
    filter (the listing's query), or `all` when it has none."""
    from cosmos_outbox_operators._routes.dead_letters import FILTER_FIELDS

    chosen = {k: query[k] for k in FILTER_FIELDS if query.get(k)}
    return chosen or {"all": True}


def query_string(values: dict[str, Any]) -> str:
    """`values` (those set) as a URL's query string, with its "?" ("" when none is set)."""
    kept = {k: str(v) for k, v in values.items() if v not in (None, "")}
    return f"?{urlencode(kept)}" if kept else ""


def chart(readings: list[dict[str, Any]]) -> Markup:
    """The backlog's last hour as an inline SVG chart: pending events (left axis) and the oldest
    pending event's age in seconds (right axis), one point per reading."""
    from cosmos_outbox_operators._console.chart import backlog_chart

    return Markup(backlog_chart(readings))  # noqa: S704  # SVG pygal built from numbers
