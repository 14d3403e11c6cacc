"""A test aggregate with a large field, for the claim check: a manuscript whose revisions carry
the whole text (up to Cosmos DB's 2 MB item limit) while the manuscript keeps only its length
and digest, so a revision's transactional batch (the manuscript + its event) stays under the
2 MB batch limit. The Contact's fields stay small; this is how an app with a document, a rich
description or an attachment's metadata meets Service Bus' 256 KB."""

from __future__ import annotations

import hashlib

from cosmos_outbox.aggregates import Aggregate, Event


class Manuscript(Aggregate):
    title: str
    length: int = 0
    digest: str = ""

    @classmethod
    def start(cls, title: str) -> Manuscript:
        manuscript = cls(title=title)
        manuscript.record(ManuscriptStarted)
        return manuscript

    def revise(self, text: str) -> None:
        self.length = len(text)
        self.digest = hashlib.sha256(text.encode()).hexdigest()
        self.record(ManuscriptRevised, text=text)


@Manuscript.event
class ManuscriptStarted(Event):
    title: str


@Manuscript.event
class ManuscriptRevised(Event):
    text: str


def text_of(size: int, seed: str) -> str:
    """`size` characters of readable text, different per seed."""
    line = f"{seed}: the quick brown fox jumps over the lazy dog. "
    return (line * (size // len(line) + 1))[:size]
