"""One answer, two forms: the signed-in door's operations answer JSON (the admin key's door's very
bytes) unless the request asks for HTML (`HX-Request: true`, or an `Accept` preferring
`text/html`); then the JSON answer (a problem too) is rendered by the operation's template
(`render.fragment`): the page shows nothing the route did not answer."""

from __future__ import annotations

import json

import azure.functions as func

__all__ = ["negotiated", "wants_html"]

_JSON_TYPES = ("application/json", "application/problem+json")


def _quality(accept: str, media: str) -> float:
    """The q-value `accept` gives `media` (its most specific match), 0 when none."""
    best, best_rank = 0.0, -1
    kind = media.split("/")[0]
    for part in accept.split(","):
        name, *params = (p.strip() for p in part.split(";"))
        name = name.lower()
        rank = 2 if name == media else 1 if name == f"{kind}/*" else 0 if name == "*/*" else -1
        if rank < best_rank or rank < 0:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        best, best_rank = q, rank
    return best


def wants_html(req: func.HttpRequest) -> bool:
    if req.headers.get("hx-request") == "true":
        return True
    accept = req.headers.get("accept", "")
    return bool(accept) and _quality(accept, "text/html") > _quality(accept, "application/json")


def negotiated(
    req: func.HttpRequest,
    operation: str,
    response: func.HttpResponse,
    *,
    base: str,
    answers: type | None = None,
) -> func.HttpResponse:
    """`response` (JSON, a problem, or empty) in the form `req` asks for; `base` is the
    console's path (the page's links and actions are under it); `answers`, the model the
    operation declares it answers with (the fragment of its kind, when it has none of its
    own)."""
    if not wants_html(req):
        response.headers["Vary"] = "Accept, HX-Request"
        return response
    media = (response.mimetype or "").split(";")[0].strip().lower()
    body = response.get_body() or b""
    if body and media not in _JSON_TYPES:
        return response  # not a JSON answer (already HTML, or bytes of its own): as it is
    from cosmos_outbox_operators._console.render import fragment

    answer = json.loads(body) if body else None
    problem = media == "application/problem+json"
    html = fragment(
        "problem" if problem else operation,
        answer=answer,
        status=response.status_code,
        request=req,
        base=base,
        answers=None if problem else answers,
    )
    headers = {
        k: v
        for k, v in response.headers.items()
        if k.lower() not in {"content-type", "content-length"}
    }
    headers["Vary"] = "Accept, HX-Request"
    headers["Cache-Control"] = "no-store"
    return func.HttpResponse(
        html,
        # htmx swaps nothing on 204: the fragment says what was done
        status_code=200 if response.status_code == 204 else response.status_code,
        headers=headers,
        mimetype="text/html",
        charset="utf-8",
    )
