"""What the sync and the aio processor share, written once: the options and the application's
hooks, what an application sees of a processor, the context a handler is given, and each line
a processor says of a lease's life with the hook that tells the application the same. The
shells (``_processor.py``: threads; ``aio/_processor_async.py``: tasks) keep only how they wait,
run and stop; the decisions are the pure core's (``_protocol``, ``_balancing``, ``_reading``).

Every line is logged as its caller's (``stacklevel=2``): a record names the shell's function
that decided, as it did when each shell logged its own lines.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from cosmos_changefeed import _clock, _keeping
from cosmos_changefeed._balancing import Round, dotnet_round, plan_round
from cosmos_changefeed._checks import Flavour, check_callable, check_containers
from cosmos_changefeed._events import (
    Monitor,
    came_from,
    error_text,
    logger,
    start_label,
    where_it_starts,
)
from cosmos_changefeed._failing import FailingBatches
from cosmos_changefeed._health import HandlerHealth
from cosmos_changefeed._keeping import pressed_interval
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._moves_log import MovesLog
from cosmos_changefeed._options import (
    DEFAULT_SET_ASIDE_AFTER,
    FailedBatch,
    Failure,
    LeaseContext,
    ProcessorOptions,
)
from cosmos_changefeed._order import SetAsideChange
from cosmos_changefeed._protocol import LeaseLostError, LeaseManager
from cosmos_changefeed._reading import Page, ProcessorStart
from cosmos_changefeed._starting import Started, throttled

#: How many times a lease's release is tried (the lease expires if none is done).
RELEASE_ATTEMPTS = 4


class ProcessorBase(FailingBatches, MovesLog):
    """The part of a processor that neither waits nor runs anything."""

    #: The shell's flavour, and the ports it takes in place of a container.
    _flavour: ClassVar[Flavour]
    _lease_ports: ClassVar[tuple[type, ...]]
    _feed_ports: ClassVar[tuple[type, ...]] = ()
    #: When the lease container last refused a write or a listing, and last throttled one
    #: (``_clock.monotonic``); the balancing rounds done since the start.
    _refused_at: float | None = None
    _throttled_at: float | None = None
    _rounds: int = 0
    #: When this instance last warned of leases that expired under throttling
    #: (``_clock.monotonic``), and those lost so since, not said yet (``_expired_throttled``).
    _expiry_said_at: float | None = None
    _expired_unsaid: tuple[str, ...] = ()
    #: The longest a lease's renewal took while the lease container refused requests (its
    #: 429s retried by azure-cosmos), and when (``_clock.monotonic``): ``_renewal_took``.
    _slowest_renewal: tuple[float, float] | None = None

    def __init__(
        self,
        monitored_container: object,
        lease_container: object,
        *,
        handler: Callable[..., Any],
        on_lease_acquired: Callable[[str], object] | None,
        on_lease_released: Callable[[str], object] | None,
        on_error: Callable[[Failure], object] | None,
        set_aside: Callable[[FailedBatch], Any] | None,
        set_aside_after: int | None,
        still_set_aside: Callable[[SetAsideChange], Any] | None = None,
        **options: Any,
    ) -> None:
        """Every check a processor makes when it is made (``_checks``, ``ProcessorOptions``):
        a mistake is refused here, naming the option and the fix, never met at run time."""
        flavour = self._flavour
        check_callable(
            handler, "handler", flavour=flavour, takes="(context, changes)", arity=2, awaited=True
        )
        for name, hook in (
            ("on_lease_acquired", on_lease_acquired),
            ("on_lease_released", on_lease_released),
        ):
            if hook is not None:
                check_callable(
                    hook, name, flavour=flavour, takes="(lease_token)", arity=1, awaited=False
                )
        if on_error is not None:
            check_callable(
                on_error,
                "on_error",
                flavour=flavour,
                takes="(failure) -- one cosmos_changefeed.Failure, since 1.0",
                arity=1,
                awaited=False,
            )
        if set_aside is not None:
            check_callable(
                set_aside, "set_aside", flavour=flavour, takes="(batch)", arity=1, awaited=True
            )
        elif set_aside_after is not None:
            raise ValueError(
                "set_aside_after is given without set_aside: no batch would ever be set aside "
                "(give set_aside, the callable that keeps a batch the handler keeps failing on)"
            )
        if still_set_aside is not None:
            if set_aside is None:
                raise ValueError(
                    "still_set_aside is given without set_aside: no change is ever set aside to "
                    "hold its partition key behind (give set_aside too)"
                )
            check_callable(
                still_set_aside,
                "still_set_aside",
                flavour=flavour,
                takes="(change) -- a cosmos_changefeed.SetAsideChange",
                arity=1,
                awaited=True,
            )
        if set_aside is not None and set_aside_after is None:
            set_aside_after = DEFAULT_SET_ASIDE_AFTER
        self.options = ProcessorOptions(set_aside_after=set_aside_after, **options)
        check_containers(
            monitored_container, lease_container, flavour, self._feed_ports, self._lease_ports
        )
        self._monitor = Monitor(on_lease_acquired, on_lease_released, on_error)
        self._set_aside = set_aside
        self._still_set_aside = still_set_aside
        #: The monitored container's partition key paths (``still_set_aside``), once started.
        self._paths: list[str] | None = None
        #: The handler's calls across the leases: an outage told from a poison, a stall said.
        self._health = HandlerHealth()
        self._manager: LeaseManager | None = None
        self._start: ProcessorStart | None = None
        self._acquiring: set[str] = set()
        self._set_aside_count = 0
        #: Guards the warning of expiries under throttling (the sync processor's lease threads).
        self._expiry_said = threading.Lock()

    # -- what an application sees ------------------------------------------------------------

    @property
    def processor_name(self) -> str:
        return self.options.processor_name

    @property
    def instance_name(self) -> str:
        return self.options.instance_name

    @property
    def lease_prefix(self) -> str | None:
        """The prefix of this processor's documents in the lease container (once started)."""
        return self._manager.prefix if self._manager is not None else None

    @property
    def batches_set_aside(self) -> int:
        """How many batches this instance handed to ``set_aside`` and checkpointed past."""
        return self._set_aside_count

    @property
    def stalled_since(self) -> dt.datetime | None:
        """When this instance's handler began to fail on every change it is given (None: it
        is not stalled): the metric of an outage (a gauge: now minus this)."""
        return self._health.stalled_since

    @property
    def start_position(self) -> ProcessorStart | None:
        """Where a lease without a checkpoint starts (once started): "Beginning", "Now" (at
        its first read: the all-versions-and-deletes mode) or a time."""
        return self._start

    def _plan(self, leases: Sequence[Lease], manager: LeaseManager) -> Round:
        """This round's plan, from one listing of the leases."""
        opts = self.options
        name, expiration, now = opts.instance_name, opts.lease_expiration_interval, manager.now()
        if opts.balancing == "dotnet":
            return dotnet_round(leases, name, expiration, now)
        return plan_round(leases, name, expiration, now, pressed=self._pressed)

    def _refuse_while_started(self, what: str, started: bool) -> None:
        if started:
            raise RuntimeError(
                f"{what}: processor '{self.processor_name}' is running; stop it first (its "
                "leases would change under the restore)"
            )

    # -- what a handler is given ---------------------------------------------------------------

    def _context(self, lease: Lease, page: Page) -> LeaseContext:
        return LeaseContext(
            lease_token=lease.lease_token,
            feed_range=lease.feed_range.to_feed_range() if lease.feed_range is not None else {},
            processor_name=self.options.processor_name,
            instance_name=self.options.instance_name,
            continuation=page.etag,
            headers=page.headers,
        )

    # -- what a processor says of its leases (and tells the application) -----------------------

    def _started(self, facts: Started) -> None:
        """Keep what a start found (``_starting``), say it, and warn of what it found wrong."""
        self._manager, self._start, self._rounds = facts.manager, facts.start, 0
        opts = self.options
        if opts.balancing == "dotnet":  # .NET's renewal reads first; its updates drop handOver
            facts.manager.read_before_renew, facts.manager.hands_over = True, False
        prefix, created, start = facts.prefix, facts.created, facts.start
        logger.info(
            "processor '%s' (instance %s): leases '%s..*'%s; acquire %gs, renew %gs, expiry %gs; "
            "poll %gs; a lease without a checkpoint starts at %s",
            opts.processor_name,
            opts.instance_name,
            prefix,
            f" ({created} created)" if created else "",
            opts.lease_acquire_interval,
            opts.lease_renew_interval,
            opts.lease_expiration_interval,
            opts.poll_delay,
            start_label(start),
            stacklevel=2,
        )
        for warning in start_warnings(facts, opts.processor_name):
            logger.warning("processor '%s': %s", opts.processor_name, warning, stacklevel=2)
        if facts.keda_prefix is None and facts.loopback:
            logger.info(
                "processor '%s': %s", opts.processor_name, keda_blind(facts, opts.processor_name)
            )

    def _listening_now(self, tokens: Iterable[str]) -> None:
        logger.info(
            "processor '%s' (instance %s): listening, lease(s) %s",
            self.processor_name,
            self.instance_name,
            ", ".join(sorted(tokens)) or "none yet",
            stacklevel=2,
        )

    # -- a lease container that refuses (throttles) -------------------------------------------

    def _refused(self, error: BaseException) -> None:
        """The lease container refused a request (not a conflict: throttled, unreachable)."""
        self._refused_at = _clock.monotonic()
        if throttled(error):
            self._throttled_at = self._refused_at

    def _within_expiration(self, at: float | None, intervals: float = 1.0) -> bool:
        """Whether ``at`` is within ``intervals`` expiration intervals of now."""
        expiration = self.options.lease_expiration_interval
        return at is not None and _clock.monotonic() - at < expiration * intervals

    @property
    def _pressed(self) -> bool:
        """Whether the lease container refused a request lately (``_keeping.PRESSED_FOR``
        expiration intervals): the instance then asks less of it (``_keeping``: renewals and
        listings less often)."""
        return self._within_expiration(self._refused_at, _keeping.PRESSED_FOR)

    @property
    def _throttled(self) -> bool:
        """Whether the lease container answered a 429 (past azure-cosmos's retries) lately
        (``_keeping.PRESSED_FOR`` expiration intervals): a handled batch's checkpoint then
        waits for the lease's renewal (``_keeping``)."""
        return self._within_expiration(self._throttled_at, _keeping.PRESSED_FOR)

    def _renew_interval(self) -> float:
        """How long after its last write a lease is renewed (``_keeping.pressed_interval`` while
        the lease container refuses requests: the last safe moment, from the longest a renewal
        took within the expiration interval)."""
        opts = self.options
        interval = opts.lease_renew_interval
        if self._pressed:
            slowest = self._slowest_renewal
            took = (
                slowest[1] if slowest is not None and self._within_expiration(slowest[0]) else None
            )
            return pressed_interval(interval, opts.lease_expiration_interval, took)
        return interval

    def _renewal_took(self, seconds: float) -> None:
        """A renewal (done or failed) took ``seconds``: while the lease container refuses
        requests, the longest within the expiration interval sets the last safe moment to
        renew at (``_renew_interval``)."""
        now, slowest = _clock.monotonic(), self._slowest_renewal
        if slowest is None or not self._within_expiration(slowest[0]) or seconds >= slowest[1]:
            self._slowest_renewal = (now, seconds)

    def _renewal_retry(self, lease: Lease, interval: float, failures: int) -> float:
        """The wait before a failed renewal is tried again (``_keeping.until_renewal``)."""
        manager = self._manager
        assert manager is not None
        return _keeping.until_renewal(
            lease, manager.now(), interval, failures, pressed=self._pressed
        )

    def _balance_delay(
        self, failures: int, done: Round | None = None, *, holding: bool = True
    ) -> float:
        """The wait before the next balancing round (after ``done``): the acquire interval -- a
        round more half-way through the first (an instance that started with others took what
        it could before it saw them: its surplus is given back, and taken, sooner); after
        ``failures`` failed rounds in a row, doubled at each up to the expiration interval --
        the acquire interval for an instance that holds no lease (``holding`` False: a listing
        refused costs no request units, and it has no renewal of its own to leave room for);
        while the lease container refuses requests, the expiration interval -- two after a
        round that had nothing to do (at its share, nothing taken, given or asked for)."""
        opts = self.options
        interval = opts.lease_acquire_interval
        longest = max(interval, opts.lease_expiration_interval)
        if failures:
            if not holding:
                return interval
            return float(min(interval * 2.0 ** min(failures, 16), longest))
        if self._pressed:
            return longest * (2 if done is not None and done.idle else 1)
        self._rounds += 1
        return interval / 2 if self._rounds <= 2 else interval

    def _release_again(self, lease: Lease, attempt: int, error: BaseException) -> bool:
        """Whether a release that failed (the ``attempt``-th time, with ``error``) is tried
        again: a few times (``RELEASE_ATTEMPTS``), while the lease is within its bound
        (``_keeping.fresh``); throttled (a 429 past azure-cosmos's retries, now or lately), for
        as long as it takes, until the lease has been expired for an expiration interval -- a
        lease renewed at the last safe moment is often past the bound when it is given back. A
        release refused for good leaves the lease to expire: without processing for the
        expiration interval, taken then, its checkpoint the last written.

        A release is written after the lease's processing ended and is conditioned on this
        instance's last write of it: tried again late, it is refused if another instance took
        the lease meanwhile, and releases it, its checkpoint with it, if none did."""
        manager = self._manager
        assert manager is not None
        expiration, now = self.options.lease_expiration_interval, manager.now()
        if throttled(error) or self._throttled:
            return _keeping.age(lease, now) < 2 * expiration
        return attempt < RELEASE_ATTEMPTS and _keeping.fresh(lease, now, expiration)

    def _release_delay(self, attempt: int) -> float:
        interval = self.options.lease_renew_interval
        return _keeping.write_retry_delay(attempt, interval / 8, interval)

    def _balancing_failed(self, exc: Exception, failures: int, *, holding: bool = True) -> float:
        """Say that a round failed (the ``failures``-th in a row; ``holding``: this instance
        holds a lease); the wait before the next."""
        self._refused(exc)
        delay = self._balance_delay(failures, holding=holding)
        logger.warning(
            "processor '%s': lease balancing failed (%s); again in %gs",
            self.processor_name,
            error_text(exc),
            delay,
            stacklevel=2,
        )
        return delay

    def _not_acquired(self, lease: Lease, exc: Exception) -> None:
        if not isinstance(exc, LeaseLostError):
            self._refused(exc)
        if isinstance(exc, LeaseLostError):
            logger.info(
                "processor '%s': %s not acquired (%s)",
                self.processor_name,
                lease,
                exc,
                stacklevel=2,
            )
            return
        logger.warning(
            "processor '%s': lease %s not acquired (%s)",
            self.processor_name,
            lease.lease_token,
            error_text(exc),
            stacklevel=2,
        )
        self._notify_error(lease.lease_token, exc, "acquire")

    def _acquired(
        self, seen: Lease, acquired: Lease, manager: LeaseManager, start: ProcessorStart
    ) -> None:
        opts = self.options
        logger.info(
            "processor '%s': lease %s acquired (%s); %s",
            self.processor_name,
            seen.lease_token,
            came_from(seen, opts.lease_expiration_interval, manager.now(), opts.instance_name),
            where_it_starts(acquired, start),
            stacklevel=2,
        )
        self._notify(self._monitor.on_lease_acquired, seen.lease_token)

    def _lost(self, token: str, exc: LeaseLostError, held: Lease | None = None) -> None:
        """Say that a lease was lost; ``held``: the lease as this instance last wrote it (a
        lease that expired under it while the lease container throttled is warned of too)."""
        logger.info(
            "processor '%s': lease %s lost (%s); its processing stopped, the new owner "
            "reads again from its last checkpoint",
            self.processor_name,
            token,
            exc,
            stacklevel=2,
        )
        if held is not None and not exc.gone and self._expired_under_throttling(held):
            self._expired_throttled(token)
        self._notify(self._monitor.on_lease_released, token)

    def _expired_under_throttling(self, held: Lease) -> bool:
        """Whether ``held`` expired under this instance while the lease container throttled:
        its last write here is older than the expiration interval, and a 429 (past
        azure-cosmos's retries) came within the interval -- its renewals were refused."""
        manager = self._manager
        if manager is None or not self._within_expiration(self._throttled_at):
            return False
        return _keeping.age(held, manager.now()) >= self.options.lease_expiration_interval

    def _expired_throttled(self, token: str) -> None:
        """A lease lost because the lease container refused its renewals for the whole
        expiration interval: a WARNING that names the setting and the remedy -- one per
        expiration interval at most; the leases lost meanwhile are named by the next one."""
        now, expiration = _clock.monotonic(), self.options.lease_expiration_interval
        with self._expiry_said:
            self._expired_unsaid = (*self._expired_unsaid, token)
            said = self._expiry_said_at
            if said is not None and now - said < expiration:
                return
            tokens, self._expired_unsaid, self._expiry_said_at = self._expired_unsaid, (), now
        since = "" if said is None else f" (since its last such warning, {now - said:.0f}s ago)"
        logger.warning(
            "processor '%s' (instance %s): lease(s) %s expired under throttling%s: the lease "
            "container refused their renewals (429s past azure-cosmos's retries) for the whole "
            "lease_expiration_interval (%gs) and other instances took them (what was handled "
            "since their last checkpoint is given again); give the lease container more "
            "request units, or lengthen lease_expiration_interval (fewer renewals: simulated "
            "at a quarter of the request units a fleet needs and the default 60 s, 100 leases "
            "on 10 instances even out 20 to 29 acquire intervals after a change of membership, "
            "not one to three)",
            self.processor_name,
            self.instance_name,
            ", ".join(tokens),
            since,
            expiration,
            stacklevel=3,
        )

    def _processing_failed(self, token: str, exc: Exception) -> None:
        logger.error(
            "processor '%s': lease %s processing failed (%s)",
            self.processor_name,
            token,
            error_text(exc),
            stacklevel=2,
        )
        self._notify_error(token, exc, "process")

    def _released(
        self, lease: Lease, failure: Exception | None, released: Lease | None = None
    ) -> None:
        """The end of a release: done (``failure`` None, or another instance took the lease
        meanwhile: a LeaseLostError, theirs), or not done (the lease expires); ``released``:
        the lease as written (its owner: the instance it was handed over to)."""
        if isinstance(failure, LeaseLostError):
            failure = None
        if failure is not None:
            self._refused(failure)
            logger.warning(
                "processor '%s': lease %s not released (%s); it expires after %gs",
                self.processor_name,
                lease.lease_token,
                error_text(failure),
                self.options.lease_expiration_interval,
                stacklevel=2,
            )
            self._notify_error(lease.lease_token, failure, "release")
            return
        logger.info(
            "processor '%s': lease %s %s",
            self.processor_name,
            lease.lease_token,
            f"handed over to {released.owner}"
            if released is not None and released.owner
            else "released",
            stacklevel=2,
        )
        self._notify(self._monitor.on_lease_released, lease.lease_token)

    def _not_replaced(self, lease: Lease, exc: Exception) -> bool:
        """Why a gone lease was not replaced: lost to its owner (False: nothing to do), or a
        failure (True: the caller releases it, for the next instance that reads it)."""
        if isinstance(exc, LeaseLostError):
            logger.info(
                "processor '%s': lease %s lost before its split (%s); its owner replaces it",
                self.processor_name,
                lease.lease_token,
                exc,
                stacklevel=2,
            )
            return False
        logger.error(
            "processor '%s': lease %s: its range is gone but the lease could not be "
            "replaced (%s); released, for the next instance that reads it",
            self.processor_name,
            lease.lease_token,
            error_text(exc),
            stacklevel=2,
        )
        self._notify_error(lease.lease_token, exc, "split")
        return True

    def _split(self, lease: Lease, created: Sequence[Lease], last_continuation: str | None) -> None:
        logger.info(
            "processor '%s': lease %s split into %s; each starts where the lease was (%s)",
            self.processor_name,
            lease.lease_token,
            ", ".join(child.lease_token for child in created) or "leases another instance made",
            "its continuation" if last_continuation else "no continuation yet",
            stacklevel=2,
        )
        self._notify(self._monitor.on_lease_released, lease.lease_token)

    def _not_released_in(self, count: int, seconds: float) -> None:
        logger.warning(
            "processor '%s': %d lease(s) not released in %gs; they expire after %gs",
            self.processor_name,
            count,
            seconds,
            self.options.lease_expiration_interval,
            stacklevel=2,
        )

    def _renewal_failed(self, token: str, exc: Exception, again_in: float) -> None:
        self._refused(exc)
        self._again(token, "renewal", exc, again_in)
        self._notify_error(token, exc, "renew")

    def _read_failed(self, token: str, exc: Exception) -> None:
        self._again(token, "change feed read", exc, self.options.poll_delay)
        self._notify_error(token, exc, "read")

    def _again(self, token: str, what: str, exc: Exception, seconds: float) -> None:
        logger.warning(
            "processor '%s': lease %s %s failed (%s); again in %gs",
            self.processor_name,
            token,
            what,
            error_text(exc),
            seconds,
            stacklevel=3,
        )

    def _checkpoint_failed(self, token: str, exc: Exception, again_in: float) -> None:
        self._refused(exc)
        self._again(token, "checkpoint", exc, again_in)
        self._notify_error(token, exc, "checkpoint")

    def _no_etag(self, token: str) -> None:
        logger.error(
            "processor '%s': lease %s: the response had no etag to checkpoint",
            self.processor_name,
            token,
            stacklevel=2,
        )


def start_warnings(facts: Started, processor_name: str) -> list[str]:
    """What a start found that works, but not as an operator would expect (docs/deploying.md)."""
    warnings: list[str] = []
    if facts.expires_documents is False:
        warnings.append(
            "the lease container has TTL off (no default_ttl): the initialisation lock "
            f"'{facts.prefix}.lock' that an instance leaves if it dies while it creates the "
            "leases is then never removed, and every instance waits for it for ever; turn TTL "
            "on (default_ttl=-1: nothing else expires), as .NET's docs ask"
        )
    if facts.adopted:
        warnings.append(
            f"{facts.adopted} lease(s) written by cosmos-changefeed 1.0 under "
            f"'{facts.legacy_prefix}..' (the account's IPv6 host without the brackets .NET "
            f"writes) adopted: they go on from their checkpoints under '{facts.prefix}..', as "
            ".NET's; the old documents are left -- delete them once no instance of 1.0 runs"
        )
    if facts.keda_prefix is None:
        if not facts.loopback:  # this machine's emulator: said at INFO (`keda_blind`)
            warnings.append(keda_blind(facts, processor_name))
    elif facts.foreign_leases:
        warnings.append(
            f"{len(facts.foreign_leases)} lease(s) under KEDA's prefix '{facts.keda_prefix}' "
            f"are not this processor's (another container's, under the same processor name: "
            f"{', '.join(facts.foreign_leases[:3])}): KEDA's azure-cosmosdb scaler adds their "
            "lag to this processor's. Give each processor (each outbox) a processor_name of "
            "its own"
        )
    return warnings


def keda_blind(facts: Started, processor_name: str) -> str:
    """Why KEDA's scaler would find none of these leases (the account's host)."""
    return (
        "the account's host has no dot (localhost) or is an IPv6 literal: KEDA's "
        f"azure-cosmosdb scaler finds leases by '{processor_name}' + the host (without "
        "brackets) up to its first dot + '.', which these leases' ids "
        f"('{facts.prefix}..') do not start with: it would find none and never scale. Use "
        "an address with a dot (127.0.0.1, or a name such as cosmos.local) for a KEDA rule "
        "to read these leases"
    )
