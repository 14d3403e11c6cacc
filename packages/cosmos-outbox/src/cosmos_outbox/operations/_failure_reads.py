"""The failure records' reads by entity and by event (`Failures`' base): an entity's open
records as its dead letters (a count from its groups' summaries; a page after a sequence number;
those of some numbers), an event's records, an aggregate's open ones, and a page of the records
of both kinds (`listed`: dead letters and the quarantine's, by kind, state and group) -- what the
dead letters' routes, the failures' routes and the journey read, each bounded by its query
(`operations._failures`, the module)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Literal

from cosmos_outbox._mapper.failure import (
    FAILED_MESSAGE_TYPE,
    FAILURE_GROUP_TYPE,
    FAILURES_OF_AGGREGATE,
    FAILURES_OF_EVENT,
    FailureGroupRecord,
    FailureRecord,
    FailureState,
    failure_partition,
    failure_record,
    group_record,
)
from cosmos_outbox.errors import InvalidContinuationError, InvalidQueryError
from cosmos_outbox.operations._failure_items import QUARANTINE_ENTITY
from cosmos_outbox.ports import AsyncDocumentStore, Page

#: A failure record's kind: a dead letter drained, or an event the relay quarantined.
FailureKind = Literal["deadLetter", "quarantine"]

logger = logging.getLogger("cosmos_outbox.operators")
#: Ids (or numbers) in one query's `IN (...)`: served from an index, a query each 100.
_IDS_PER_QUERY = 100
#: An entity's open records (`{names}`: its names as its groups store them) by the dead letter
#: each is now (`sequenceNumber`, its last attempt's): `_AFTER` the next `@count` after
#: `@after`, in order (served by a range index on `/sequenceNumber/?`: docs/indexing.md);
#: `_NUMBERED` those of `{numbers}`; `_UNNUMBERED` those written before records kept it.
_OPEN_OF = "SELECT * FROM c WHERE c.type = @type AND c.state = @state AND c.entity IN ({names})"
_AFTER = (
    "SELECT TOP @count * FROM c WHERE c.type = @type AND c.state = @state"
    " AND c.entity IN ({names}) AND c.sequenceNumber > @after ORDER BY c.sequenceNumber"
)
_NUMBERED = _OPEN_OF + " AND c.sequenceNumber IN ({numbers})"
_UNNUMBERED = _OPEN_OF + " AND NOT IS_DEFINED(c.sequenceNumber)"
#: A group's records (in its partition), of any state or `_IN_STATE` one state: what `listed`
#: reads a page of, group after group.
_OF_GROUP = "SELECT * FROM c WHERE c.type = @type"
_IN_STATE = _OF_GROUP + " AND c.state = @state"


class FailureReads:
    """The reads by entity and by event of the failure records in `_store`."""

    _store: AsyncDocumentStore

    async def groups(self) -> list[FailureGroupRecord]:
        """Every group's summary (one document per group)."""
        return [group_record(d) for d in await self._store.of_type(FAILURE_GROUP_TYPE)]

    async def members(
        self, group: str, *, states: Sequence[FailureState] = ("open",)
    ) -> list[FailureRecord]:
        """The group's records in `states`, oldest failure first."""
        documents = await self._store.of_type(
            FAILED_MESSAGE_TYPE, partition_key=failure_partition(group)
        )
        records = [failure_record(d) for d in documents]
        return sorted(
            (r for r in records if r.state in states), key=lambda r: (r.first_failed_at, r.id)
        )

    async def open_count(self, entity: str) -> int:
        """How many of `entity`'s failures are open: its groups' summaries summed (exact)."""
        return sum(g.open for g in await self.groups() if _same(g.entity, entity))

    async def open_at(self, entity: str) -> list[FailureRecord]:
        """Every open record of `entity` (each of its groups with open ones read whole)."""
        found: list[FailureRecord] = []
        for summary in await self.groups():
            if _same(summary.entity, entity) and summary.open > 0:
                found += await self.members(summary.group)
        return found

    async def open_after(
        self, entity: str, after: int, count: int
    ) -> AsyncIterator[list[FailureRecord]]:
        """`entity`'s open records whose dead letters (`_number`: each one's last attempt's)
        come after sequence number `after`, in that order, pages of `count` until one comes back
        short (none empty): each page one query of the next `count` after the last one given
        (`ORDER BY c.sequenceNumber`, TOP), whatever the entity holds; the records written
        before they kept their number (`_unnumbered`, read once) merged in. A container whose
        indexing policy cannot serve that ORDER BY (it excludes `/sequenceNumber/?`): every open
        record read once and sorted, as before (`open_at`; logged)."""
        names = await self._names(entity)
        if not names:
            return
        unnumbered = [r for r in await self._unnumbered(names) if _number(r) > after]
        start = after
        while True:
            try:
                documents = await self._store.query(
                    # only parameters' names in the text: the names are parameters
                    _AFTER.format(names=", ".join(_named(names, "@entity"))),
                    {"@after": start, "@count": count, **self._open_of(names)},
                )
            except InvalidQueryError as refused:
                if "order" not in str(refused).casefold():
                    raise
                logger.warning(
                    "the container cannot order the failure records by their sequence numbers "
                    "(index /sequenceNumber/?: docs/indexing.md); every open record of %s "
                    "read: %s",
                    entity,
                    refused,
                )
                every = _in_order(r for r in await self.open_at(entity) if _number(r) > start)
                for first in range(0, len(every), count):
                    yield every[first : first + count]
                return
            page = _in_order([*map(failure_record, documents), *unnumbered])[:count]
            if page:
                yield page
            if len(page) < count:
                return
            start = _number(page[-1])
            unnumbered = [r for r in unnumbered if _number(r) > start]

    async def open_numbered(self, entity: str, numbers: Sequence[int]) -> list[FailureRecord]:
        """`entity`'s open records whose dead letters (`_number`) are `numbers`: queries
        of up to `_IDS_PER_QUERY` numbers (`c.sequenceNumber IN (...)`), and, for numbers none
        of them has, the records written before they kept their number (`_unnumbered`)."""
        names = await self._names(entity)
        wanted = list(dict.fromkeys(numbers))
        if not names or not wanted:
            return []
        found: list[FailureRecord] = []
        for start in range(0, len(wanted), _IDS_PER_QUERY):
            part = wanted[start : start + _IDS_PER_QUERY]
            keys = _named(part, "@n")
            documents = await self._store.query(
                # only parameters' names in the text: the names and numbers are parameters
                _NUMBERED.format(
                    names=", ".join(_named(names, "@entity")), numbers=", ".join(keys)
                ),
                {**self._open_of(names), **dict(zip(keys, part, strict=True))},
            )
            found += [failure_record(d) for d in documents]
        missing = set(wanted) - {_number(r) for r in found}
        if missing:
            found += [r for r in await self._unnumbered(names) if _number(r) in missing]
        return found

    async def _names(self, entity: str) -> list[str]:
        """`entity` as its groups with open records store it (compared regardless of case, as
        `open_count` and `open_at` compare it)."""
        return sorted(
            {g.entity for g in await self.groups() if _same(g.entity, entity) and g.open > 0}
        )

    @staticmethod
    def _open_of(names: Sequence[str]) -> dict[str, Any]:
        """The parameters of `_OPEN_OF` (and the queries built on it) for the entity's `names`."""
        return {
            "@type": FAILED_MESSAGE_TYPE,
            "@state": "open",
            **dict(zip(_named(names, "@entity"), names, strict=True)),
        }

    async def _unnumbered(self, names: Sequence[str]) -> list[FailureRecord]:
        """The entity's open records written before records kept their `sequenceNumber` (none
        once each is written again: an attempt more, settled)."""
        documents = await self._store.query(
            # only parameters' names in the text: the names are parameters
            _UNNUMBERED.format(names=", ".join(_named(names, "@entity"))),
            self._open_of(names),
        )
        return [failure_record(d) for d in documents]

    async def listed(
        self,
        *,
        kind: FailureKind | None = None,
        state: FailureState | None = None,
        group: str | None = None,
        page_size: int,
        continuation: str | None = None,
    ) -> Page[FailureRecord]:
        """Up to `page_size` records of both kinds (dead letters, the quarantine's), of `kind`,
        in `state`, of `group` (None: any), and the token of the next page (None: the last).
        Exact, from the store: the groups' summaries (one query) say which groups hold such
        records (their counts by state, their kind), and those groups are read in the order of
        their ids, each in its own partition (`c.type`, its `state` tested on the group's
        records only), a store page at a time; the token is the group a page stopped in and the
        store's token there. A group gone meanwhile is passed; a record moved to another group
        meanwhile (another cause) may be listed in both, or in neither, on that page; a group
        whose archived or resolved records expired (its summary still counts them) costs one
        query that finds none of them."""
        summaries = sorted(
            (s for s in await self.groups() if _holds(s, kind, state, group)),
            key=lambda s: s.group,
        )
        at, token = _position(continuation)
        found: list[FailureRecord] = []
        query, parameters = (
            (_IN_STATE, {"@type": FAILED_MESSAGE_TYPE, "@state": state})
            if state is not None
            else (_OF_GROUP, {"@type": FAILED_MESSAGE_TYPE})
        )
        ahead = [s for s in summaries if at is None or s.group >= at]
        for n, summary in enumerate(ahead):
            token = token if summary.group == at else None
            while len(found) < page_size:
                page = await self._store.query_page(
                    query,
                    parameters,
                    partition_key=summary.partition,
                    page_size=page_size - len(found),
                    continuation=token,
                )
                found += [failure_record(d) for d in page.items]
                if (token := page.continuation_token) is None:
                    break
            if len(found) >= page_size:
                if token is not None:
                    return Page(found, json.dumps([summary.group, token]))
                after = ahead[n + 1].group if n + 1 < len(ahead) else None
                return Page(found, json.dumps([after, None]) if after is not None else None)
        return Page(found, None)

    async def of_event(self, event_id: str) -> list[FailureRecord]:
        """The records of `event_id`'s failures, in any state (one per entity it failed at;
        a move unfinished counted once), oldest failure first."""
        return _latest(
            await self._store.query(
                FAILURES_OF_EVENT, {"@type": FAILED_MESSAGE_TYPE, "@event": event_id}
            )
        )

    async def open_of_aggregate(self, aggregate_id: str) -> list[FailureRecord]:
        """The open records of an aggregate's events' failures (by `aggregateId`, which the
        container indexes), oldest failure first."""
        return [
            r
            for r in _latest(
                await self._store.query(
                    FAILURES_OF_AGGREGATE, {"@type": FAILED_MESSAGE_TYPE, "@id": aggregate_id}
                )
            )
            if r.state == "open"
        ]


def kind_of(record: FailureRecord | FailureGroupRecord) -> FailureKind:
    """Whether a record (or a group) is a dead letter's or the quarantine's."""
    return "quarantine" if record.entity_kind == QUARANTINE_ENTITY else "deadLetter"


def _holds(
    summary: FailureGroupRecord,
    kind: FailureKind | None,
    state: FailureState | None,
    group: str | None,
) -> bool:
    """Whether the group's summary counts records of `kind`, in `state`, of `group`."""
    counts = {"open": summary.open, "archived": summary.archived, "resolved": summary.resolved}
    held = counts[state] if state is not None else sum(counts.values())
    return (
        held > 0
        and (kind is None or kind_of(summary) == kind)
        and (group is None or summary.group == group)
    )


def _position(continuation: str | None) -> tuple[str | None, str | None]:
    """Where `listed` goes on: the group, and the store's token in it (None, None: the first)."""
    if continuation is None:
        return None, None
    try:
        at, token = json.loads(continuation)
    except (ValueError, TypeError):
        raise InvalidContinuationError("not a failures' token") from None
    if not isinstance(at, str) or not (token is None or isinstance(token, str)):
        raise InvalidContinuationError("not a failures' token")
    return at, token


def _latest(documents: Iterable[dict[str, Any]]) -> list[FailureRecord]:
    """The stored records, a move unfinished counted once (its latest copy), oldest failure
    first."""
    latest: dict[str, FailureRecord] = {}
    for record in map(failure_record, documents):
        kept = latest.get(record.id)
        if kept is None or record.last_failed_at > kept.last_failed_at:
            latest[record.id] = record
    return sorted(latest.values(), key=lambda r: (r.first_failed_at, r.id))


def _same(a: str, b: str) -> bool:
    return a.casefold() == b.casefold()


def _in_order(records: Iterable[FailureRecord]) -> list[FailureRecord]:
    """`records` in the order of their dead letters' sequence numbers."""
    return sorted(records, key=lambda r: (_number(r), r.id))


def _named(values: Sequence[object], prefix: str) -> list[str]:
    """The names of a query's parameters for `values`: `prefix0`, `prefix1`, ..."""
    return [f"{prefix}{i}" for i in range(len(values))]


def _number(record: FailureRecord) -> int:
    """The sequence number of the dead letter a record is now: its last attempt's (`letter_of`;
    0 with none)."""
    return record.attempts[-1].sequence_number if record.attempts else 0
