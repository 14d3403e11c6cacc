"""What a Cosmos DB container refuses, and how a document's JSON is copied: shared by the lease
store port (``_store``) and the one in-memory model of a container (``_memory_feed``), which
both the in-memory feed and the in-memory lease store are. Pure."""

from __future__ import annotations

import copy
from typing import Any


class LeaseStoreError(Exception):
    """A lease store operation the service refused."""


class NotFoundError(LeaseStoreError):
    """404: no such document."""


class PreconditionFailedError(LeaseStoreError):
    """412: the document changed since the etag the write was conditioned on."""


class ConflictError(LeaseStoreError):
    """409: a document with that id exists."""


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists and scalars; anything else deep-copied):
    ``copy.deepcopy``'s result, several times faster on documents."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {
            key: item if type(item) in _SCALARS else json_copy(item) for key, item in value.items()
        }
    if kind is list:
        return [item if type(item) in _SCALARS else json_copy(item) for item in value]
    return copy.deepcopy(value)


#: What ``json_copy`` returns as it is (immutable).
_SCALARS = frozenset({str, int, float, bool, type(None)})
