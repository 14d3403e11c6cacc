"""The in-memory store's query engine: the app's Cosmos DB SQL (a subset of the NoSQL query
language, with parameters) evaluated over the store's documents, with Cosmos DB's semantics
(undefined, types across comparisons, ORDER BY across types). `_grammar` is what is served (and
what is refused, named), `_values` what values do, `_run` a query run over documents."""

from __future__ import annotations

from cosmos_outbox_testing._sql._run import run_query
from cosmos_outbox_testing._sql._values import QueryUnsupported

__all__ = ["QueryUnsupported", "run_query"]
