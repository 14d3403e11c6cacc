"""The outbox as a Functions blueprint, for any aggregate: the change-feed relay
(`relay_events`), the backlog estimate on a timer (`outbox_backlog`) and the operators' routes
(`/outbox/...`, auth level ADMIN in Azure: the host's master key). It knows no aggregate: it
relays every event document of the container, whatever its aggregate type, and is built from
settings alone. An app registers it beside its own routes (`cosmos_outbox.Outbox` does):

    app.register_functions(outbox_blueprint(lambda: services().outbox))

Container and database names are app-setting expressions (%COSMOS_DATABASE%, ...). The host
cannot resolve %NAME% in int binding properties, but the worker indexes the app with the app
settings in its environment, so the poll delay, batch size and backlog schedule are read (and
validated) from FEED_POLL_DELAY_MS, MAX_ITEMS_PER_INVOCATION and BACKLOG_ESTIMATE_SCHEDULE when
the blueprint is built, at indexing; nothing else is read or opened until a function runs.

Decision: the reason of a discard is the required query parameter `reason` (1-500 characters,
the text rules of every field). DELETE bodies are dropped by some clients and proxies, and a
query parameter shows in the host's request log next to the route.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import azure.functions as func
from pydantic import TypeAdapter

from cosmos_outbox._blueprints.operators import (
    OperatorModels,
    OperatorReason,
    OutboxStatusView,
    RedriveView,
)
from cosmos_outbox._documents import read_feed
from cosmos_outbox.http._operations import HttpApi, HttpCall, PathParameter, QueryParameter, Reply
from cosmos_outbox.http._paging import TokenCodec, next_token
from cosmos_outbox.ports import BacklogEstimator, EventStore, Page, Quarantine
from cosmos_outbox.settings import TriggerSettings, load_trigger_settings

if TYPE_CHECKING:  # imported when a function first runs, not at indexing (cold start)
    from cosmos_outbox._relay import Relay
    from cosmos_outbox._relay.operators import OutboxOperators
    from cosmos_outbox._relay.telemetry import RelayTelemetry

EVENT_ID = PathParameter("eventId", "the event id")
REASON = QueryParameter(
    "reason", TypeAdapter(OperatorReason),
    "Why the event is discarded (written to the audit log)", required=True,
    missing="reason is required: say why the event is discarded")
_ERRORS = (400, 429, 500, 503)


__all__ = ["OutboxDependencies", "outbox_blueprint"]


@dataclass
class OutboxDependencies:
    """What the outbox's functions use. The relay is built once per process, on first use."""

    relay_factory: Callable[[], Relay]
    quarantine: Callable[[], Quarantine]
    events: Callable[[], EventStore]
    backlog: Callable[[], BacklogEstimator]
    #: Seals the quarantine list's tokens (a purpose of its own: an app's list token is refused).
    tokens: TokenCodec
    telemetry: RelayTelemetry
    event_ttl_seconds: int
    _relay: Relay | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    @property
    def relay(self) -> Relay:
        with self._lock:
            if self._relay is None:
                self._relay = self.relay_factory()
            return self._relay

    @property
    def operators(self) -> OutboxOperators:
        from cosmos_outbox._relay.operators import OutboxOperators

        return OutboxOperators(
            quarantine=self.quarantine(), events=self.events(), relay=lambda: self.relay,
            backlog=self.backlog, event_ttl_seconds=self.event_ttl_seconds)


def outbox_blueprint(
    dependencies: Callable[[], OutboxDependencies],
    *,
    triggers: TriggerSettings | None = None,
    models: OperatorModels = OperatorModels(),  # noqa: B008  (frozen, shared on purpose)
) -> func.Blueprint:
    """The outbox's functions, served with `dependencies()` (called on each invocation: build
    them once per process behind it). `triggers` default to the app settings (read now, at
    indexing); `models` are the operators' request and answer models (an app's subclasses)."""
    deps = dependencies
    settings = triggers if triggers is not None else load_trigger_settings()
    bp = func.Blueprint()  # type: ignore[no-untyped-call]  # untyped in azure-functions

    @bp.retry(
        strategy="exponential_backoff",
        max_retry_count="-1",
        minimum_interval="00:00:01",
        maximum_interval="00:01:00",
    )
    @bp.cosmos_db_trigger(
        arg_name="documents",
        connection="CosmosDBConnection",
        database_name="%COSMOS_DATABASE%",
        container_name="%COSMOS_CONTAINER%",
        lease_container_name="%COSMOS_LEASE_CONTAINER%",
        create_lease_container_if_not_exists=True,
        # A new lease (first deployment, lease container reset) starts from the oldest event
        # still stored, not from "now": events written before the relay first ran are not lost.
        start_from_beginning=True,  # type: ignore[arg-type]  # azure-functions 2.3 types it `time`
        feed_poll_delay=settings.feed_poll_delay_ms,
        max_items_per_invocation=settings.max_items_per_invocation,
    )
    def relay_events(documents: func.DocumentList) -> None:
        """Relay one trigger invocation. Raises when a send fails, so the retry policy
        redelivers the same documents and the lease does not move."""
        deps().relay.relay(read_feed(doc.to_dict() for doc in documents))

    @bp.timer_trigger(
        arg_name="timer",
        schedule=settings.backlog_estimate_schedule,
        run_on_startup=False,
        use_monitor=False,
    )
    def outbox_backlog(timer: func.TimerRequest) -> None:
        """One tick: estimate the backlog, record the gauges, apply the TTL guard."""
        current = deps()
        from cosmos_outbox._relay.backlog import report_backlog

        report_backlog(current.backlog(), current.telemetry,
                       event_ttl_seconds=current.event_ttl_seconds)

    # Bounded: a store or a broker that hangs makes an operator's call a 503 + Retry-After
    # within BOUND_SECONDS, as /health, never a wait on the SDKs' own timeouts and retries.
    api = HttpApi(bp, parameters={"eventId": EVENT_ID}, auth_level=func.AuthLevel.ADMIN,
                  bounded=True)

    @api.operation(route="outbox/status", method="GET", status=200,
                   summary="Operators: the relay's backlog per lease and the number of "
                           "quarantined events",
                   response=OutboxStatusView, errors=_ERRORS)
    def outbox_status(call: HttpCall[None]) -> Reply:
        return Reply(OutboxStatusView.of(deps().operators.status()))

    @api.operation(route="outbox/quarantine", method="GET", status=200, paged=True,
                   summary="Operators: the quarantined events (resolved ones too, until they "
                           "expire), one page at a time",
                   response=models.quarantine_page, errors=_ERRORS)
    def list_quarantine(call: HttpCall[None]) -> Reply:
        current = deps()
        cursor = call.cursor(current.tokens)
        page = current.operators.quarantine_page(
            page_size=call.page_size, continuation=cursor.store_token if cursor else None)
        token = next_token(page.continuation_token, cursor, current.tokens)
        body = models.quarantine_page.of(Page(page.items, token), models.quarantine_item)
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @api.operation(route="outbox/quarantine/{eventId}/replay", method="POST", status=202,
                   summary="Operators: send a quarantined event through the relay again with "
                           "its own id; the record answered is resolved, or still quarantined "
                           "with the new reason",
                   response=models.quarantine_item, errors=(400, 404, 429, 500, 503))
    def replay_quarantined(call: HttpCall[None]) -> Reply:
        return Reply(models.quarantine_item.of(deps().operators.replay(call.path["eventId"])))

    @api.operation(route="outbox/quarantine/{eventId}", method="DELETE", status=204,
                   summary="Operators: delete a quarantine record for good, with the reason "
                           "(audit log)",
                   query=(REASON,), errors=(400, 404, 429, 500, 503))
    def discard_quarantined(call: HttpCall[None]) -> Reply:
        deps().operators.discard(call.path["eventId"], call.query["reason"])
        return Reply()

    @api.operation(route="outbox/redrive", method="POST", status=202,
                   summary="Operators: publish again every stored event created at or after "
                           "`since` (of one aggregate type, and one aggregate, if given), per "
                           "aggregate in version order (duplicates inside the topic's "
                           "detection window are dropped)",
                   request=models.redrive_request, response=RedriveView,
                   errors=(400, 413, 415, 429, 500, 503))
    def redrive_events(call: HttpCall[Any]) -> Reply:
        aggregate_type, aggregate_id = call.body.scope
        report = deps().operators.redrive(call.body.since, aggregate_type=aggregate_type,
                                          aggregate_id=aggregate_id)
        return Reply(RedriveView(events=report.events, sent=report.sent,
                                 quarantined=report.quarantined))

    return bp
