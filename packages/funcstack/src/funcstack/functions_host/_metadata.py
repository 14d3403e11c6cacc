"""Trigger metadata as the host hands it to the worker: moments as JSON text in UTC, the way its
Newtonsoft serializes a ``DateTime`` or ``DateTimeOffset`` (each trigger renders its own:
``DateTimeOffset`` with ``+00:00`` for a queue message, ``Z`` for a Service Bus one)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from typing import Any

from funcstack.functions_host._rpc import protos

__all__ = ["json_times", "utc"]


def utc(moment: dt.datetime) -> dt.datetime:
    """A moment in UTC (one without a zone is taken as UTC, as the SDKs give them)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def json_times(
    moments: Mapping[str, dt.datetime | None], render: Callable[[dt.datetime], str]
) -> dict[str, Any]:
    """Trigger metadata moments as the host sends them, JSON text (``TypedData.json``) of
    ``render``'s string, by name; a moment that is None is left out."""
    pb = protos()
    return {
        name: pb.TypedData(json=json.dumps(render(moment)))
        for name, moment in moments.items()
        if moment is not None
    }
