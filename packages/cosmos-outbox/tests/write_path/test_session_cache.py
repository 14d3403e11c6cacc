"""The transactions' sequence cache: the head (number and etag) of each transaction's sequence
this process wrote last, emptied when it holds its most (a stream it forgot reads its sequence
once: the contract suite's racing transactions show that path keeps the numbers right)."""

from __future__ import annotations

import pytest

from cosmos_outbox._write import streams
from cosmos_outbox._write.streams import Sequences


def test_it_is_emptied_when_full_and_keeps_what_it_is_given_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streams, "_CACHED_SEQUENCES", 3)
    cache = Sequences()
    for n in range(3):
        cache.put(("booking", f"s{n}"), (n, f'"{n}"'))
    cache.put(("booking", "s1"), (5, '"5"'))  # a stream it holds: written again, nothing lost
    assert [cache.get(("booking", f"s{n}")) for n in range(3)] == [
        (0, '"0"'),
        (5, '"5"'),
        (2, '"2"'),
    ]
    cache.put(("booking", "s3"), (1, '"a"'))  # a fourth: the cache starts again
    assert [cache.get(("booking", f"s{n}")) for n in range(3)] == [None, None, None]
    assert cache.get(("booking", "s3")) == (1, '"a"')
    cache.forget(("booking", "s3"))
    assert cache.get(("booking", "s3")) is None
