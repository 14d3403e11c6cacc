"""The relay as operators see it: ready, healthy or stalled (`RelayState`), its backlog per
lease, what blocks it, the unresolved quarantine, the scheduled events waiting
(`StatusOperators.now`), the backlog timer's last hour, health, and the subscriptions lacking
the targeted-delivery rule (docs/operating-the-outbox.md, "Subscriptions lacking the
targeted-delivery rule").

**Healthy means moving.** Ready is configured; healthy is moving: every pending event leaves
within the trigger's poll delay and a bound (`Parts.stall_after_seconds`). Stalled is pending
and not moving: an event waits longer than that, or the relay records failed attempts on one. A
stalled relay says since when, which dependency does not answer (Service Bus is asked with one
round trip that changes nothing, `Relay.probe`, at most every PROBE_EVERY_SECONDS) and the last
error it knows: a lease renewed says nothing about movement. The topic's rules are read at most
every TARGET_RULES_EVERY_SECONDS (past TARGET_RULES_SECONDS: "not checked", asked again after
TARGET_RULES_RETRY_SECONDS)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from cosmos_outbox._model import Model, of_attributes
from cosmos_outbox._relay.backlog import age_seconds
from cosmos_outbox._relay.backlog_history import Reading
from cosmos_outbox._relay.health import RelayBlocked
from cosmos_outbox._relay.scheduled import Waiting, waiting
from cosmos_outbox.errors import DependencyUnavailableError, RelayNotReadyError
from cosmos_outbox.operations._dependencies import COSMOS_DB, SERVICE_BUS, answered
from cosmos_outbox.operations._health import health_answer
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.operations._watch import VanishedLetter
from cosmos_outbox.ports import LeaseBacklog, TargetRuleCheck
from cosmos_outbox.telemetry import error_type

if TYPE_CHECKING:
    from cosmos_outbox.operations._dead_letters import DeadLetterOperators

__all__ = [
    "PROBE_EVERY_SECONDS",
    "TARGET_RULES_EVERY_SECONDS",
    "DependencyState",
    "LeaseStatus",
    "OutboxStatus",
    "RelayState",
    "StatusOperators",
    "TargetRulesState",
    "relay_state",
]

#: The status asks Service Bus at most this often (a stalled relay's console polls every 10 s).
PROBE_EVERY_SECONDS = 10.0
#: How long the probe may take (a fresh connection: TLS, authentication, a link).
PROBE_SECONDS = 2.0
#: The status reads the topic's rules (the management API) at most this often.
TARGET_RULES_EVERY_SECONDS = 300.0
#: How long the status waits for them (a few round trips); past it, "not checked", asked again
#: after `TARGET_RULES_RETRY_SECONDS`.
TARGET_RULES_SECONDS = 2.0
TARGET_RULES_RETRY_SECONDS = 60.0


class LeaseStatus(Model):
    """One change-feed lease: who holds it, how many changes wait after its continuation, and
    how old the first of them is."""

    lease: str
    pending: int
    oldest_pending_age_seconds: float | None
    owner: str | None
    #: when its holder last wrote it (a renewal too: not a sign of movement)
    checkpoint_at: str | None


class DependencyState(Model):
    """Whether one dependency of the relay answered when the status asked (`answers`), and
    the error when it did not."""

    name: str
    answers: bool
    error: str | None = None


class RelayState(Model):
    """Ready, healthy or stalled (see the module). `state`: `healthy` (moving: nothing waits
    longer than `allowed_seconds`), `stalled` (pending and not moving, `since` then), or `not
    ready` (it cannot start: `last_error` says what is missing)."""

    state: Literal["healthy", "stalled", "not ready"]
    #: configured: it found what it needs
    ready: bool
    #: pending events leave within `allowed_seconds`
    moving: bool
    #: the trigger's poll delay and the bound: how long a pending event may wait
    allowed_seconds: float
    #: stalled (or not ready) since
    since: datetime | None = None
    #: the first dependency that does not answer (None: all that were asked answered)
    not_answering: str | None = None
    dependencies: list[DependencyState] = []
    #: the last error the relay recorded, or the probe's
    last_error: str | None = None
    #: the state in a sentence on call can act on
    summary: str


class SubscriptionLackingRule(Model):
    """A subscription of the topic lacking the targeted-delivery rule: the rules that let
    another subscription's messages in, and whether `cosmos-outbox target-rules --yes` can give
    it the rule (only Azure's `$Default` lets them in)."""

    subscription: str
    rules: list[str]
    fixable: bool


class TargetRulesState(Model):
    """Whether each subscription of the topic carries the targeted-delivery rule (see the
    module): `checked` False with `reason` when the status could not look."""

    topic: str
    checked: bool
    #: the topic's subscriptions (when checked)
    subscriptions: list[str] = []
    lacking: list[SubscriptionLackingRule] = []
    reason: str | None = None
    #: when the management API was read (the answer is kept `TARGET_RULES_EVERY_SECONDS`)
    read_at: datetime
    #: the check in a sentence on call can act on
    summary: str

    @classmethod
    def of(cls, check: TargetRuleCheck, *, read_at: datetime) -> TargetRulesState:
        return of_attributes(
            cls,
            check,
            lacking=[of_attributes(SubscriptionLackingRule, s) for s in check.lacking],
            reason=check.reason or None,
            read_at=read_at,
            summary=check.describe(),
        )


class OutboxStatus(Model):
    """The outbox as operators see it (see the module)."""

    relay: RelayState
    pending: int
    oldest_pending_age_seconds: float | None
    quarantined: int
    leases: list[LeaseStatus]
    #: null while the relay works; what it is stuck on otherwise
    relay_blocked: RelayBlocked | None = None
    #: the scheduled events waiting (null: not read)
    scheduled: Waiting | None = None
    #: dead letters that left their queue without being applied, each with what recovers it
    #: (`cosmos_outbox.operations._watch`)
    dead_letters_vanished: list[VanishedLetter] = []
    #: whether each subscription of the topic carries the targeted-delivery rule (see the
    #: module)
    target_rules: TargetRulesState | None = None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def relay_state(
    leases: list[LeaseBacklog],
    *,
    now: float,
    allowed_seconds: float,
    blocked: RelayBlocked | None,
    not_ready: str | None = None,
    dependencies: list[DependencyState] | None = None,
) -> RelayState:
    """The relay's state from the backlog's leases read at `now` (epoch seconds), its blocked
    record, and why it cannot start (`not_ready`); `dependencies` as asked (see the module)."""
    asked = dependencies or []
    silent = next((d for d in asked if not d.answers), None)
    said: dict[str, Any] = {
        "allowed_seconds": allowed_seconds,
        "dependencies": asked,
        "not_answering": silent.name if silent else None,
    }
    if not_ready is not None or (blocked is not None and blocked.event_id is None):
        reason = not_ready or (blocked.reason if blocked is not None else "")
        return RelayState(
            state="not ready",
            ready=False,
            moving=False,
            since=blocked.since if blocked is not None else None,
            last_error=reason,
            summary=f"The relay is not ready: it cannot start ({reason})",
            **said,
        )
    late = [
        lease.oldest_created_at + allowed_seconds
        for lease in leases
        if lease.pending
        and lease.oldest_created_at is not None
        and now - lease.oldest_created_at > allowed_seconds
    ]
    if not late and blocked is None:
        pending = sum(lease.pending for lease in leases)
        waits = f"{pending} event(s) pending, none waiting longer than {allowed_seconds:g} s"
        summary = f"The relay is moving: {waits if pending else 'nothing is pending'}"
        return RelayState(state="healthy", ready=True, moving=True, summary=summary, **said)
    starts = [datetime.fromtimestamp(at, UTC) for at in late]
    if blocked is not None and blocked.since is not None:
        starts.append(blocked.since)
    last_error = blocked.reason if blocked is not None else silent.error if silent else None
    if silent is not None:
        why = f"{silent.name} does not answer"
    elif last_error:
        why = f"the relay's last error: {last_error}"
    else:
        why = "no dependency it asked failed (is the relay's function running?)"
    waiting_for = (
        f"events wait longer than {allowed_seconds:g} s"
        if late
        else f"it failed {blocked.attempts if blocked else 0} attempt(s) on event "
        f"{blocked.event_id if blocked else '-'}"
    )
    return RelayState(
        state="stalled",
        ready=True,
        moving=False,
        since=min(starts) if starts else None,
        last_error=last_error,
        summary=f"The relay is stalled: {waiting_for}; {why}",
        **said,
    )


class StatusOperators:
    """The relay as operators see it: its state, its backlog per lease and the unresolved
    quarantine (`now`), the backlog timer's last hour (`backlog`), health (`health`), and the
    targeted-delivery rules (`target_rules`)."""

    #: how long a read of the topic's rules is kept; how long the status waits for one; how
    #: long a read that did not answer in time is kept (see the module)
    rules_every_seconds: float = TARGET_RULES_EVERY_SECONDS
    rules_wait_seconds: float = TARGET_RULES_SECONDS
    rules_retry_seconds: float = TARGET_RULES_RETRY_SECONDS

    def __init__(self, parts: Parts, dead_letters: DeadLetterOperators | None = None) -> None:
        self._parts = parts
        self._letters = dead_letters
        #: the last probe of Service Bus: when (monotonic), and what it found
        self._probed: tuple[float, DependencyState] | None = None
        #: the last read of the topic's rules: when (monotonic), what it found, and whether the
        #: management API answered in time
        self._rules: tuple[float, TargetRulesState, bool] | None = None
        self._check = TargetRuleCheck("", False, reason="not read yet")

    async def rule_check(self) -> TargetRuleCheck:
        """The topic's subscriptions and their rules as last read (`target_rules`' read, kept
        as long): what the previews evaluate (`_deliveries`)."""
        await self.target_rules()
        return self._check

    async def target_rules(self) -> TargetRulesState:
        """Which subscriptions of the topic lack the targeted-delivery rule, or not checked and
        why; the management API asked at most every TARGET_RULES_EVERY_SECONDS (see the
        module)."""
        if self._rules is not None:
            read, kept, answered_in_time = self._rules
            keep = self.rules_every_seconds if answered_in_time else self.rules_retry_seconds
            if time.monotonic() - read < keep:
                return kept
        port = self._parts.target_rules()
        topic = str(getattr(port, "topic", ""))
        probed = self._probed
        silent = (
            probed is not None
            and not probed[1].answers
            and time.monotonic() - probed[0] < PROBE_EVERY_SECONDS
        )
        if silent and self._rules is not None:  # Service Bus is away: what it last said stands
            return self._rules[1]
        in_time, why, check = not silent, "", None
        if silent:
            why = "Service Bus does not answer the status's probe (asked again once it does)"
        elif port is None:
            why = "these services read no topic's rules (no SERVICEBUS_TOPIC)"
        else:
            try:
                check = await answered(SERVICE_BUS, port.check(), seconds=self.rules_wait_seconds)
            except DependencyUnavailableError:
                in_time, why = (
                    False,
                    (
                        f"the management API did not answer within {self.rules_wait_seconds:g} s "
                        f"(asked again in {self.rules_retry_seconds:g} s)"
                    ),
                )
            except Exception as exc:  # the port never raises; a stand-in might: say why
                why = f"{error_type(exc)}: {exc!s:.200}"
        check = check if check is not None else TargetRuleCheck(topic, False, reason=why)
        read_at = datetime.fromtimestamp(self._parts.clock(), UTC)
        found = TargetRulesState.of(check, read_at=read_at)
        self._rules, self._check = (time.monotonic(), found, in_time), check
        return found

    async def _probe(self) -> DependencyState:
        """Does Service Bus answer? Asked at most every PROBE_EVERY_SECONDS (see the module)."""
        clock = time.monotonic()
        if self._probed is not None and clock - self._probed[0] < PROBE_EVERY_SECONDS:
            return self._probed[1]
        try:
            await answered(SERVICE_BUS, self._parts.relay().probe(), seconds=PROBE_SECONDS)
            found = DependencyState(name=SERVICE_BUS, answers=True)
        except Exception as exc:
            found = DependencyState(
                name=SERVICE_BUS, answers=False, error=f"{error_type(exc)}: {str(exc)[:300]}"
            )
        self._probed = (time.monotonic(), found)
        return found

    async def relay(
        self, leases: list[LeaseBacklog], *, not_ready: str | None = None
    ) -> RelayState:
        """The relay's state from leases the caller read (the backlog timer's, the status's),
        its blocked record, and, when it does not move, the dependencies asked."""
        return await self._state(leases, await self._blocked(), not_ready)

    async def _state(
        self, leases: list[LeaseBacklog], blocked: RelayBlocked | None, not_ready: str | None
    ) -> RelayState:
        given: dict[str, Any] = {"blocked": blocked, "not_ready": not_ready}
        given |= {"now": self._parts.clock(), "allowed_seconds": self._parts.stall_after_seconds}
        state = relay_state(leases, **given)
        if state.moving:
            return state
        asked = [DependencyState(name=COSMOS_DB, answers=True), await self._probe()]
        return relay_state(leases, **given, dependencies=asked)

    async def _blocked(self) -> RelayBlocked | None:
        health = self._parts.health
        return await answered(COSMOS_DB, health.current()) if health is not None else None

    async def now(self) -> OutboxStatus:
        """The relay's state, the change-feed backlog as the estimator sees it, and the
        unresolved quarantine. Without its lease container there is no backlog to read: no
        leases, and the relay not ready, naming it (what the backlog timer records too)."""
        now = self._parts.clock()
        missing: RelayNotReadyError | None = None
        try:
            backlog = await answered(COSMOS_DB, self._parts.backlog().estimate())
        except RelayNotReadyError as exc:
            backlog, missing = [], exc
        leases = [
            of_attributes(LeaseStatus, b, oldest_pending_age_seconds=_round(age_seconds(b, now)))
            for b in backlog
        ]
        ages = [s.oldest_pending_age_seconds for s in leases]
        known = [a for a in ages if a is not None]
        blocked = await self._blocked()
        why = f"{error_type(missing)}: {missing}" if missing else None
        state = await self._state(backlog, blocked, why)
        if blocked is None and why is not None:
            blocked = RelayBlocked(
                event_id=None, reason=why, since=None, last_attempt=None, attempts=0
            )
        return OutboxStatus(
            relay=state,
            pending=sum(s.pending for s in leases),
            oldest_pending_age_seconds=max(known) if known else None,
            quarantined=await answered(COSMOS_DB, self._parts.quarantine.count()),
            leases=leases,
            relay_blocked=blocked,
            scheduled=await answered(COSMOS_DB, waiting(self._parts.store)),
            dead_letters_vanished=await self._letters.vanished()
            if self._letters is not None
            else [],
            target_rules=await self.target_rules(),
        )

    async def backlog(self) -> list[Reading]:
        """The backlog timer's readings of the last hour, oldest first (the console's chart)."""
        return await answered(COSMOS_DB, self._parts.history.readings())

    async def health(self) -> dict[str, Any]:
        """/health's answer: the store answers (else it raises), and "degraded", with what
        the relay is stuck on, when the relay says so, or when the backlog timer's last
        reading (of the last two minutes: one point read, not an estimate per call) has an
        event waiting longer than the relay is allowed (stalled)."""
        answer = await health_answer(
            self._parts.store.ping,
            self._parts.health.current if self._parts.health is not None else None,
        )
        if answer["status"] != "healthy":
            return answer
        readings = await self._parts.history.readings(within_seconds=120.0)
        last = readings[-1] if readings else None
        allowed = self._parts.stall_after_seconds
        age = last.oldest_pending_age_seconds if last is not None else None
        if last is None or not last.pending or age is None or age <= allowed:
            return answer
        return {
            "status": "degraded",
            "relay": {
                "state": "stalled",
                "reason": f"an event waits {age:.0f} s, longer than {allowed:g} s",
                "since": last.at.isoformat(),
                "pending": last.pending,
            },
        }
