"""The bulk operations' kinds (DESIGN §19), each said once, in `BULK_KINDS`: what its items are
(`items`: a failure group's, a watched entity's dead letters matching a filter, the stored
events), what it does to each (`action`), whether it may start with a canary and whether it
needs a reason, its words (the operation's one-line summary begins with them) and its outcome on
the console (the fragment's `data-outcome`). The model (`Operation.kind`, `summary_of`), the use
cases (`BulkOperators`: a start's canary and reason, the items a worker acts through), the
worker (which kinds send a canary), the command line's flags and the console's fragment read
them here; nothing else takes a kind's name apart.

A new kind is a row here and its name in `Kind`; a new kind of items, a builder in
`BulkOperators.items_of` (a test enumerates the kinds and starts, works and renders each)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Literal, get_args

__all__ = ["BULK_KINDS", "BulkKinds", "CanaryBounds", "ItemsOf", "Kind", "KindSpec", "spec_of"]

Kind = Literal[
    "groups.retry", "groups.discard", "deadletters.resubmit", "deadletters.discard", "redrive"
]
#: What an operation's items are: a failure group's (the quarantine's events, or dead letters:
#: their failure records when the app keeps them), a watched entity's dead letters matching a
#: filter (or every one), the stored events created since a time.
ItemsOf = Literal["group", "letters", "redrive"]


@dataclasses.dataclass(frozen=True)
class KindSpec:
    """One kind of bulk operation (see the module)."""

    kind: Kind
    items: ItemsOf
    #: what it does to each item: sends it again (a quarantined event replayed, a dead letter
    #: resubmitted, a stored event re-driven) or gives it up
    action: Literal["retry", "resubmit", "discard", "redrive"]
    #: a few items first, the rest once they are not seen failing again (`CanaryBounds`)
    canary: bool
    #: refused without the operator's reason
    reason: bool
    #: what it does, in words: the start of its summary
    does: str
    #: the console's name of its outcome (`data-outcome` of its fragment)
    outcome: str

    @property
    def sends(self) -> bool:
        """Whether it sends its items again (else it gives them up)."""
        return self.action != "discard"


@dataclasses.dataclass(frozen=True)
class CanaryBounds:
    """A canary's size (items sent first) and how long it waits to be seen applied or failed
    again: by default and at most (what the use cases check, the routes and the command line
    accept, the console's fields offer)."""

    size: int = 5
    most: int = 100
    wait_seconds: float = 60.0
    most_wait_seconds: float = 3600  # an integer: the OpenAPI maximum as before


class BulkKinds(Mapping[str, KindSpec]):
    """The kinds by name (a `KindSpec` each, in `Kind`'s order), and the canary's bounds of
    those that send one."""

    def __init__(self, *specs: KindSpec, canary: CanaryBounds) -> None:
        self._specs: dict[str, KindSpec] = {s.kind: s for s in specs}
        if tuple(self._specs) != get_args(Kind):  # pragma: no cover - a row missing
            raise AssertionError(f"BULK_KINDS {tuple(self._specs)} is not Kind {get_args(Kind)}")
        self.canary = canary

    def __getitem__(self, kind: str) -> KindSpec:
        return self._specs[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


#: Every kind of bulk operation, in one table.
BULK_KINDS = BulkKinds(
    KindSpec("groups.retry", items="group", action="retry", canary=True, reason=False,
             does="Retry of failure group", outcome="group-retry"),
    KindSpec("groups.discard", items="group", action="discard", canary=False, reason=True,
             does="Discard of failure group", outcome="group-discard"),
    KindSpec("deadletters.resubmit", items="letters", action="resubmit", canary=True,
             reason=False, does="Resubmit of the dead letters at", outcome="resubmit-letters"),
    KindSpec("deadletters.discard", items="letters", action="discard", canary=False,
             reason=True, does="Discard of the dead letters at", outcome="discard-letters"),
    KindSpec("redrive", items="redrive", action="redrive", canary=False, reason=False,
             does="Re-drive of the stored events", outcome="redrive"),
    canary=CanaryBounds(),
)  # fmt: skip


def spec_of(kind: str) -> KindSpec:
    """The kind named `kind` (ValueError: no such kind)."""
    if kind in BULK_KINDS:
        return BULK_KINDS[kind]
    raise ValueError(f"no bulk operation of kind {kind!r}: one of {', '.join(BULK_KINDS)}")
