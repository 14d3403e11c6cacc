"""A test aggregate with a large field, for the claim check: a manuscript whose revisions carry
the whole text (up to Cosmos DB's 2 MB item limit) while the manuscript keeps only its length
and digest, so a revision's transactional batch (the manuscript + its event) stays under the
2 MB batch limit. The Contact's fields stay small; this is how an app with a document, a rich
description or an attachment's metadata meets Service Bus' 256 KB."""

from __future__ import annotations

import hashlib
from typing import ClassVar, Literal

from pydantic import ConfigDict

from cosmos_outbox._domain import Aggregate, DomainEvent, event_aliases


class ManuscriptEvent(DomainEvent):
    model_config = ConfigDict(alias_generator=event_aliases("manuscript"))
    aggregate_type: ClassVar[str] = "manuscript"


class ManuscriptStarted(ManuscriptEvent):
    action: Literal["ManuscriptStarted"] = "ManuscriptStarted"
    title: str


class ManuscriptRevised(ManuscriptEvent):
    action: Literal["ManuscriptRevised"] = "ManuscriptRevised"
    text: str


class Manuscript(Aggregate):
    aggregate_type: ClassVar[str] = "manuscript"
    collection: ClassVar[str] = "manuscripts"

    title: str
    length: int = 0
    digest: str = ""

    @classmethod
    def start(cls, title: str) -> Manuscript:
        manuscript = cls(title=title)
        manuscript._record(ManuscriptStarted, title=title)
        return manuscript

    def revise(self, text: str) -> None:
        self.length = len(text)
        self.digest = hashlib.sha256(text.encode()).hexdigest()
        self._change(ManuscriptRevised, text=text)


def text_of(size: int, seed: str) -> str:
    """`size` characters of readable text, different per seed."""
    line = f"{seed}: the quick brown fox jumps over the lazy dog. "
    return (line * (size // len(line) + 1))[:size]
