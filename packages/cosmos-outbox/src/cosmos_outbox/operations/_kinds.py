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
from collections.abc import Mapping
from typing import Literal, get_args

__all__ = ["BULK_KINDS", "ItemsOf", "Kind", "KindSpec", "spec_of"]

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
    #: a few items first, the rest once they are not seen failing again (DEFAULT_CANARY)
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


def _kinds(*specs: KindSpec) -> Mapping[str, KindSpec]:
    table: dict[str, KindSpec] = {s.kind: s for s in specs}
    if tuple(table) != get_args(Kind):  # pragma: no cover - a row missing or out of order
        raise AssertionError(f"BULK_KINDS {tuple(table)} is not Kind {get_args(Kind)}")
    return table


#: Every kind of bulk operation, in one table.
BULK_KINDS = _kinds(
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
)  # fmt: skip


def spec_of(kind: str) -> KindSpec:
    """The kind named `kind` (ValueError: no such kind)."""
    if kind in BULK_KINDS:
        return BULK_KINDS[kind]
    raise ValueError(f"no bulk operation of kind {kind!r}: one of {', '.join(BULK_KINDS)}")
