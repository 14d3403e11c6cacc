"""What a route module declares its routes with (`Routes`): the operators' prefix, their one
API, the two doors' decorator and the anonymous one, and the app's models."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cosmos_outbox.operations import Operations
    from cosmos_outbox_operators._routes.models import OperatorModels

Declare = Callable[..., Callable[[Any], Any]]


@dataclass(frozen=True)
class Routes:
    """The routes' common ground: `operation` declares a route through both doors (bounded),
    `anonymous` through neither (`outbox/health`); `operations()` is the outbox's one API."""

    prefix: str
    operations: Callable[[], Operations]
    operation: Declare
    anonymous: Declare
    models: OperatorModels
