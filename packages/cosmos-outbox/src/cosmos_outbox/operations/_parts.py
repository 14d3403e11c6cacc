"""What the operators' roles stand on, built once by the outbox's wiring: one list (`Parts`), each
role taking what it needs."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cosmos_outbox.http._paging import TokenCodec
from cosmos_outbox.ports import (
    AsyncBacklogEstimator,
    AsyncDeadLetterQueues,
    AsyncDocumentStore,
    AsyncTargetRules,
    DeadLetterEntity,
)

if TYPE_CHECKING:
    from cosmos_outbox._quarantine import Quarantine
    from cosmos_outbox._records import LegacyEvents
    from cosmos_outbox._relay.backlog_history import BacklogHistory
    from cosmos_outbox._relay.forwarding import Relay
    from cosmos_outbox._relay.health import RelayHealth
    from cosmos_outbox.operations._failures import Failures

__all__ = ["PagingTokens", "Parts"]


#: Each kind of the operators' continuation tokens, and the purpose its key is derived for (a
#: label, not a secret).
TOKEN_PURPOSES = {
    "quarantine": "outbox-admin/quarantine-token/v1",
    "dead_letters": "outbox-admin/dead-letter-token/v1",
    "documents": "outbox-admin/document-token/v1",
    "redrive": "outbox-admin/redrive-token/v1",
    "failures": "outbox-admin/failure-token/v1",
}


@dataclass(frozen=True)
class PagingTokens:
    """The sealed continuation tokens of the operators' paged answers (a token of one kind is
    refused by another: each has its own key)."""

    quarantine: TokenCodec
    dead_letters: TokenCodec
    documents: TokenCodec
    redrive: TokenCodec
    failures: TokenCodec

    @classmethod
    def derived(cls, key: Callable[[str], bytes]) -> PagingTokens:
        """Each kind's codec, keyed by `key(its purpose)` (the services' secret, derived)."""
        return cls(**{kind: TokenCodec(key(purpose)) for kind, purpose in TOKEN_PURPOSES.items()})


def _no_dead_letters() -> AsyncDeadLetterQueues | None:
    return None


def _no_target_rules() -> AsyncTargetRules | None:
    return None


@dataclass(frozen=True)
class Parts:
    """What the operators' roles stand on (see the module)."""

    store: AsyncDocumentStore
    quarantine: Quarantine
    relay: Callable[[], Relay]
    backlog: Callable[[], AsyncBacklogEstimator]
    history: BacklogHistory
    event_ttl_seconds: int
    tokens: PagingTokens
    legacy: LegacyEvents | None = None
    clock: Callable[[], float] = time.time
    health: RelayHealth | None = None
    dead_letters: Callable[[], AsyncDeadLetterQueues | None] = _no_dead_letters
    watched: tuple[DeadLetterEntity, ...] = ()
    subscribers: Callable[[], Mapping[str, AsyncDocumentStore]] = dict
    #: how long a pending event may wait before the relay is stalled: the trigger's poll delay
    #: and OUTBOX_RELAY_STALL_SECONDS (`cosmos_outbox.operations._status`)
    stall_after_seconds: float = 61.0
    #: the targeted-delivery rule check (None: nothing can read the topic's rules)
    target_rules: Callable[[], AsyncTargetRules | None] = _no_target_rules
    #: the CloudEvents source base the publisher adds (the previews' messages carry it too)
    source_base: str = ""
    #: the failure records (OUTBOX_FAILURE_INGEST on): the dead letters' groups and their
    #: operations read them, not the dead-letter queues (None: off)
    failures: Failures | None = None
