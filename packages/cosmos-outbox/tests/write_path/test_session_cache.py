"""The sessions' sequence cache: the number and etag of each session's sequence this process
wrote last, emptied when it holds its most (a session it forgot reads its sequence once: the
contract suite's racing sessions show that path keeps the numbers right)."""

from __future__ import annotations

import pytest

from cosmos_outbox import _session
from cosmos_outbox._session import _Sequences


def test_it_is_emptied_when_full_and_keeps_what_it_is_given_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_session, "_CACHED_SEQUENCES", 3)
    cache = _Sequences()
    for n in range(3):
        cache.put(("booking", f"s{n}"), (n, f'"{n}"'))
    cache.put(("booking", "s1"), (5, '"5"'))  # a session it holds: written again, nothing lost
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
