"""What a relay process knows of the relay's leases, as facts anyone can read (`ProcessState`, a
snapshot): per lease, its owner and continuation as stored, when it last moved, the last error
this instance met on it, the change feed estimator's lag; and whether the process is
configured and listening. Pure: `Facts` is what the process updates as things happen (the
change feed processor's hooks, the handler, the backlog's reading), `Facts.state()` its
snapshot.

"Moving" (`ProcessState.stalls`): a lease this instance holds is stalled when its changes have not
moved for `bound` seconds while some are pending (the estimator's lag, or the handler failing
on it). An idle lease (nothing pending) moves nowhere and is not stalled; a lease held by another
instance is that instance's to judge (its own `/health`), the fleet's view is the operators'
status over the same leases."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True)
class LeaseFacts:
    """One lease of the relay as a relay process sees it."""

    lease_token: str
    #: The instance holding it as the lease container says (None: no owner), when last read.
    owner: str | None = None
    #: Its checkpoint: the change feed's position it resumes from (the service's etag).
    continuation: str | None = None
    #: When its continuation last moved: this instance's last checkpoint of it, or when the
    #: backlog's reading first saw it moved by another instance. None: not seen moving.
    moved_at: dt.datetime | None = None
    #: The change feed estimator's lag (changes not processed), at the last reading.
    estimated_lag: int | None = None
    #: The last error this instance met on it (a failed send, a failed read), and when; cleared
    #: by its next checkpoint.
    last_error: str | None = None
    last_error_at: dt.datetime | None = None
    #: Since when this instance fails on it without a checkpoint between (None: not failing).
    failing_since: dt.datetime | None = None
    #: Whether this instance processes it now, and since when.
    held_here: bool = False
    held_since: dt.datetime | None = None


@dataclass(frozen=True)
class Stall:
    """A lease this instance holds that does not move (see the module)."""

    lease_token: str
    #: Since when it has not moved (its last move, or since it was taken).
    since: dt.datetime
    #: Why: its lag, or the error it fails with.
    reason: str


@dataclass(frozen=True)
class ProcessState:
    """A snapshot of a relay process (`RelayProcessor.state()`)."""

    processor_name: str
    instance_name: str
    #: Its settings read and its clients made, the lease store initialised: None, else why not.
    not_configured: str | None
    #: What the relay needs (its topic, its payload container) found: None, else why not.
    not_ready: str | None
    #: The change feed processor listens: a change made now is relayed.
    listening: bool
    leases: tuple[LeaseFacts, ...]
    #: When the backlog was last read (the leases' owners, continuations and lags).
    estimated_at: dt.datetime | None
    started_at: dt.datetime

    @property
    def ready(self) -> bool:
        """Configured and listening: what the readiness endpoint answers."""
        return self.not_configured is None and self.not_ready is None and self.listening

    @property
    def held(self) -> tuple[str, ...]:
        return tuple(lease.lease_token for lease in self.leases if lease.held_here)

    def stalls(self, bound: float, now: dt.datetime) -> list[Stall]:
        """The leases this instance holds that have not moved for `bound` seconds while
        changes are pending (see the module)."""
        found = []
        for lease in self.leases:
            if not lease.held_here:
                continue
            if lease.failing_since is not None:
                if (now - lease.failing_since).total_seconds() > bound:
                    found.append(
                        Stall(lease.lease_token, lease.failing_since, lease.last_error or "")
                    )
                continue
            if not lease.estimated_lag:
                continue
            since = max(
                (t for t in (lease.moved_at, lease.held_since) if t is not None),
                default=self.started_at,
            )
            if (now - since).total_seconds() > bound:
                found.append(
                    Stall(lease.lease_token, since, f"{lease.estimated_lag} change(s) pending")
                )
        return found

    def as_json(self) -> dict[str, Any]:
        """The state as the process's endpoints answer it (times in ISO 8601)."""

        def when(moment: dt.datetime | None) -> str | None:
            return moment.isoformat() if moment is not None else None

        return {
            "processor": self.processor_name,
            "instance": self.instance_name,
            "ready": self.ready,
            "listening": self.listening,
            "notConfigured": self.not_configured,
            "notReady": self.not_ready,
            "startedAt": when(self.started_at),
            "estimatedAt": when(self.estimated_at),
            "leases": [
                {
                    "lease": lease.lease_token,
                    "owner": lease.owner,
                    "heldHere": lease.held_here,
                    "continuation": lease.continuation,
                    "movedAt": when(lease.moved_at),
                    "estimatedLag": lease.estimated_lag,
                    "lastError": lease.last_error,
                    "lastErrorAt": when(lease.last_error_at),
                    "failingSince": when(lease.failing_since),
                }
                for lease in self.leases
            ],
        }


@dataclass
class Facts:
    """What the process updates as things happen; `state()` is its snapshot."""

    processor_name: str
    instance_name: str
    started_at: dt.datetime
    not_configured: str | None = "starting"
    not_ready: str | None = None
    listening: bool = False
    estimated_at: dt.datetime | None = None
    leases: dict[str, LeaseFacts] = field(default_factory=dict)

    def _lease(self, token: str) -> LeaseFacts:
        return self.leases.get(token) or LeaseFacts(token)

    def acquired(self, token: str, now: dt.datetime) -> None:
        self.leases[token] = replace(
            self._lease(token),
            held_here=True,
            held_since=now,
            owner=self.instance_name,
            failing_since=None,
        )

    def released(self, token: str) -> None:
        if token in self.leases:
            self.leases[token] = replace(
                self.leases[token], held_here=False, held_since=None, failing_since=None
            )

    def failed(self, token: str, error: str, now: dt.datetime) -> None:
        lease = self._lease(token)
        self.leases[token] = replace(
            lease,
            last_error=error[:500],
            last_error_at=now,
            failing_since=lease.failing_since or now,
        )

    def checkpointed(self, token: str, continuation: str | None, now: dt.datetime) -> None:
        self.leases[token] = replace(
            self._lease(token),
            continuation=continuation,
            moved_at=now,
            last_error=None,
            last_error_at=None,
            failing_since=None,
        )

    def estimated(
        self,
        readings: list[tuple[str, str | None, str | None, int]],
        now: dt.datetime,
    ) -> None:
        """The backlog's reading: per lease (token, owner, continuation, lag). A continuation
        that moved since the last reading moved (by whichever instance); a lease no longer read
        (replaced by its children after a split) is forgotten unless this instance holds it."""
        seen = set()
        for token, owner, continuation, lag in readings:
            seen.add(token)
            lease = self._lease(token)
            moved = lease.moved_at
            if continuation is not None and continuation != lease.continuation:
                moved = now if lease.continuation is not None else moved
            self.leases[token] = replace(
                lease, owner=owner, continuation=continuation, estimated_lag=lag, moved_at=moved
            )
        for token in [t for t, lease in self.leases.items() if t not in seen]:
            if not self.leases[token].held_here:
                del self.leases[token]
        self.estimated_at = now

    def state(self) -> ProcessState:
        """The snapshot: each of `ProcessState`'s fields, this one's attribute of that name
        (the leases in their tokens' order)."""
        leases = tuple(self.leases[t] for t in sorted(self.leases, key=_token_order))
        named = {f.name: getattr(self, f.name) for f in fields(ProcessState) if f.name != "leases"}
        return ProcessState(**named, leases=leases)


def _token_order(token: str) -> tuple[int, str]:
    return (int(token), "") if token.isdigit() else (1 << 62, token)
