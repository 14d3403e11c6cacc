"""An app's own Cosmos DB SQL queries through the outbox's store (`DocumentStore.query`,
`query_page`): their parameters, given as the SDK takes them (`[{"name": "@now", "value": now}]`)
or as a mapping (`{"@now": now}`), in both shapes for the adapters (the SDK's list, the in-memory
engine's names). Pure: the sync and async adapters and the test kit's store share it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cosmos_outbox.errors import InvalidQueryError

#: A query's parameters: the SDK's list of `{"name": "@x", "value": ...}`, or a mapping of the
#: names (`@` optional) to their values; None: none.
QueryParameters = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None


def named_parameters(parameters: QueryParameters) -> dict[str, Any]:
    """The parameters by name, each name with its `@`. InvalidQueryError for a list item that is
    not `{"name", "value"}` or a name given twice."""
    if parameters is None:
        return {}
    if isinstance(parameters, Mapping):
        pairs = list(parameters.items())
    else:
        pairs = []
        for item in parameters:
            if not isinstance(item, Mapping) or "name" not in item or "value" not in item:
                raise InvalidQueryError(
                    f"a query parameter is {{'name': '@x', 'value': ...}}, not {item!r}"
                )
            pairs.append((item["name"], item["value"]))
    named: dict[str, Any] = {}
    for name, value in pairs:
        if not isinstance(name, str) or not name.lstrip("@"):
            raise InvalidQueryError(f"a query parameter's name is a string, not {name!r}")
        key = name if name.startswith("@") else f"@{name}"
        if key in named:
            raise InvalidQueryError(f"the query parameter {key} is given twice")
        named[key] = value
    return named


def sdk_parameters(parameters: QueryParameters) -> list[dict[str, Any]]:
    """The parameters as the SDK's `query_items(parameters=...)` takes them."""
    return [{"name": name, "value": value} for name, value in named_parameters(parameters).items()]
