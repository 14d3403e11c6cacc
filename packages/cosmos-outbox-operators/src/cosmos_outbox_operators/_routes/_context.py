"""What a route module declares its routes with (`Routes`): the operators' prefix, their one
API, the two doors' decorator and the anonymous one, the app's models; and `get`, `post`,
`delete`, which declare a route through both doors in one line, its summary the handler's
docstring (said once: the OpenAPI document's summary is the function's own)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cosmos_outbox_operators._types import BODY_ERRORS, ERRORS

if TYPE_CHECKING:
    from cosmos_outbox.operations import Operations
    from cosmos_outbox_operators._routes.models import OperatorModels

Declare = Callable[..., Callable[[Any], Any]]
Handler = TypeVar("Handler", bound=Callable[..., Any])


def summary_of(handler: Callable[..., Any]) -> str:
    """A route's summary: its handler's docstring, on one line."""
    return " ".join((handler.__doc__ or "").split())


@dataclass(frozen=True)
class Routes:
    """The routes' common ground: `operation` declares a route through both doors (bounded),
    `anonymous` through neither (`outbox/health`); `operations()` is the outbox's one API."""

    prefix: str
    operations: Callable[[], Operations]
    operation: Declare
    anonymous: Declare
    models: OperatorModels

    def get(
        self, path: str, response: Any, *, anonymous: bool = False, **declared: Any
    ) -> Callable[[Handler], Handler]:
        """A GET route under the prefix (errors: a thing named may be missing); `anonymous`:
        through neither door (`outbox/health`)."""
        declared = {"errors": ERRORS, **declared, "anonymous": anonymous}
        return self._declare("GET", 200, path, response, declared)

    def post(
        self, path: str, response: Any, *, status: int = 200, **declared: Any
    ) -> Callable[[Handler], Handler]:
        """A POST route under the prefix (errors: those of a body, when it takes one)."""
        errors = BODY_ERRORS if "request" in declared else ERRORS
        return self._declare("POST", status, path, response, {"errors": errors, **declared})

    def delete(self, path: str, response: Any, **declared: Any) -> Callable[[Handler], Handler]:
        return self._declare("DELETE", 200, path, response, {"errors": ERRORS, **declared})

    def _declare(
        self, method: str, status: int, path: str, response: Any, declared: dict[str, Any]
    ) -> Callable[[Handler], Handler]:
        values = declared.pop("summary_values", {})
        declare = self.anonymous if declared.pop("anonymous", False) else self.operation

        def register(handler: Handler) -> Handler:
            route = f"{self.prefix}/{path}"
            summary = summary_of(handler).format(**values) if values else summary_of(handler)
            declare(
                route=route,
                method=method,
                status=status,
                summary=summary,
                response=response,
                **declared,
            )(handler)
            return handler

        return register
