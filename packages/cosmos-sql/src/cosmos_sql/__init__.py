"""cosmos-sql: Azure Cosmos DB's SQL (a subset of the NoSQL query language, with parameters) run
in memory over JSON documents, with Cosmos DB's semantics: undefined, types across comparisons,
ORDER BY across types, TOP and OFFSET LIMIT counting results, aggregates. What the subset does not
serve is refused (`QueryUnsupported`, naming it), never answered another way.

    >>> run_query("SELECT VALUE c.n FROM c WHERE c.n > @low", {"@low": 1}, [{"n": 1}, {"n": 2}])
    [2]
"""

from __future__ import annotations

from cosmos_sql._run import run_query
from cosmos_sql._values import QueryUnsupported

__version__ = "1.0.0"

__all__ = ["QueryUnsupported", "__version__", "run_query"]
