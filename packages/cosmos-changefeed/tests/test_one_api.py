"""One API in both flavours: what ``cosmos_changefeed.aio`` exports has the names, the methods
and the parameters (names, kinds, defaults) of ``cosmos_changefeed``'s, the aio ones awaited --
so a team moves between them by adding ``await`` (issue 71: 0.1 had ``wait_until_listening(
timeout=)`` and ``stop(timeout=)`` in sync, ``wait_until_listening()`` and ``stop(grace=)`` in
aio)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import cosmos_changefeed
import cosmos_changefeed.aio

#: Names only the sync package exports: the types without I/O, which aio uses as they are.
SHARED = {
    name
    for name in cosmos_changefeed.__all__
    if name not in cosmos_changefeed.aio.__all__ and not name.startswith("_")
}


def shape(member: Any) -> list[tuple[str, Any, Any]]:
    """A callable's public parameters: name, kind, default (annotations differ by flavour)."""
    return [
        (p.name, p.kind, p.default)
        for p in inspect.signature(member).parameters.values()
        if not p.name.startswith("_")
    ]


def public_members(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") or name in {"__init__", "__enter__", "__exit__"}
    }


@pytest.mark.parametrize("name", sorted(cosmos_changefeed.aio.__all__))
def test_each_aio_name_has_the_sync_ones_methods_and_parameters(name: str) -> None:
    sync, aio = getattr(cosmos_changefeed, name), getattr(cosmos_changefeed.aio, name)
    if not isinstance(sync, type):
        return  # a type alias (Handler): its shape is in the README
    sync_members, aio_members = public_members(sync), public_members(aio)
    renamed = {"__enter__": "__aenter__", "__exit__": "__aexit__"}
    for member_name, member in sync_members.items():
        if isinstance(member, property):
            assert isinstance(aio_members.get(member_name), property), (name, member_name)
            continue
        if not callable(member):
            continue
        theirs = getattr(aio, renamed.get(member_name, member_name), None)
        assert theirs is not None, f"{name}.{member_name} is not in cosmos_changefeed.aio"
        assert shape(theirs) == shape(member), f"{name}.{member_name}"
    extra = (
        {
            member_name
            for member_name, member in aio_members.items()
            if callable(member) and not isinstance(member, property)
        }
        - set(sync_members)
        - {"__aenter__", "__aexit__"}
    )
    assert extra == set(), f"cosmos_changefeed.aio.{name} has more: {extra}"


def test_the_aio_package_exports_what_does_io_and_the_sync_one_the_rest() -> None:
    """Everything in aio is in sync; what only sync exports does no I/O (contexts, errors,
    options, the lease document) and is aio's too."""
    assert set(cosmos_changefeed.aio.__all__) <= set(cosmos_changefeed.__all__)
    assert {"LeaseContext", "Failure", "FailedBatch", "Continuation", "MissingResourceError"} <= (
        SHARED
    )
