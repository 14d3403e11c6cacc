"""The local Cosmos DB endpoint's local-only routes (``/_emulators/...``), from Python: fault
injection and the physical partitions of a container (its partition key ranges, and a live
split or merge on request).

Azure has no such data-plane calls: the service splits a physical partition on its own (past
50 GB of data, or when a throughput raise needs more partitions) and merges partitions when
asked through its control plane (``az cosmosdb sql container merge``); a client only sees the
outcome, through the REST resource ``/dbs/{db}/colls/{coll}/pkranges`` (the old ranges gone,
answering 410 with sub-status 1002, what replaced them listing them in ``parents``). These
routes make that outcome happen when a test asks for it (``splits.js`` serves them).
"""

from __future__ import annotations

import contextlib
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CosmosControlError",
    "PhysicalPartition",
    "control",
    "merge_partitions",
    "physical_partitions",
    "split_partition",
]


class CosmosControlError(RuntimeError):
    """A local-only call the endpoint refused (its message names what was wrong), or an
    endpoint that could not be reached."""


@dataclass(frozen=True)
class PhysicalPartition:
    """A live partition key range of a container: its id, its effective partition key (EPK)
    bounds, the ids of the ranges it came from (oldest first) and how many documents it
    holds."""

    id: str
    min_inclusive: str
    max_exclusive: str
    parents: tuple[str, ...]
    documents: int


def _tls_context() -> ssl.SSLContext:
    """Verifying the endpoint's certificate: signed by funcstack's local authority (_tls.py)."""
    from funcstack.cosmos._tls import local_tls

    return ssl.create_default_context(cafile=str(local_tls().ca_file))


def control(
    endpoint: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    timeout: float = 30.0,
) -> Any:
    """One call to a local-only route of the endpoint at ``endpoint`` (its URL); the answer's
    JSON body (None when it has none). A refusal is CosmosControlError with its message."""
    url = f"{endpoint.rstrip('/')}/{path.lstrip('/')}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - the local endpoint's URL
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    context = _tls_context() if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:  # noqa: S310
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = str(json.loads(detail).get("message") or detail)
        raise CosmosControlError(f"{method} {path}: {exc.code} {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CosmosControlError(
            f"the Cosmos DB endpoint at {endpoint} cannot be reached ({reason})"
        ) from None
    return json.loads(raw) if raw else None


def _route(database: str, container: str) -> str:
    quote = urllib.parse.quote
    return f"_emulators/partitions/{quote(database, safe='')}/{quote(container, safe='')}"


def _partitions(answer: Any) -> list[PhysicalPartition]:
    return [
        PhysicalPartition(
            id=str(r["id"]),
            min_inclusive=str(r["minInclusive"]),
            max_exclusive=str(r["maxExclusive"]),
            parents=tuple(str(p) for p in r.get("parents") or ()),
            documents=int(r.get("documents", 0)),
        )
        for r in answer["ranges"]
    ]


def physical_partitions(endpoint: str, database: str, container: str) -> list[PhysicalPartition]:
    """The live partition key ranges of a container, in EPK order."""
    return _partitions(control(endpoint, "GET", _route(database, container)))


def split_partition(
    endpoint: str, database: str, container: str, range_id: str | None = None
) -> list[str]:
    """Split one physical partition of a container now (``range_id``; None: the one holding
    the most documents), at the median EPK of its documents. Returns the children's ids; the
    parent's id answers 410 / 1002 from then on, as after a split in Azure."""
    body = {} if range_id is None else {"rangeId": str(range_id)}
    answer = control(endpoint, "POST", f"{_route(database, container)}/split", body)
    return [str(child) for child in answer["children"]]


def merge_partitions(
    endpoint: str, database: str, container: str, range_ids: list[str] | None = None
) -> str:
    """Merge adjacent physical partitions of a container into one now, as Azure's merge does
    (``range_ids``: two or more adjacent ranges; None: the two adjacent ranges holding the
    fewest documents together). Returns the merged range's id; the merged ranges' ids answer
    410 / 1002 from then on, and /pkranges lists the merged range with them in its
    ``parents``."""
    body: dict[str, Any] = {} if range_ids is None else {"rangeIds": [str(r) for r in range_ids]}
    answer = control(endpoint, "POST", f"{_route(database, container)}/merge", body)
    return str(answer["merged"])
