"""What a query answers, as Cosmos DB answers it, on a few documents: the semantics the README
names (undefined, types across comparisons, ORDER BY across types, TOP and OFFSET LIMIT counting
results, aggregates, parameters), and what is refused, named. In-process, no server: the breadth
of the language is test_engines_agree.py's (funcstack's engine, where it is installed)."""

from __future__ import annotations

from typing import Any

import pytest

import cosmos_sql
from cosmos_sql import QueryUnsupported, run_query

DOCUMENTS: list[dict[str, Any]] = [
    {"id": "a", "n": 2, "s": "b", "tags": ["x", "y"], "o": {"k": 1}},
    {"id": "b", "n": 1, "s": "a", "tags": []},
    {"id": "c", "s": "c", "b": True},
    {"id": "d", "n": "1", "b": False},
    {"id": "e", "n": None},
]


def ids(sql: str, parameters: dict[str, Any] | None = None) -> list[Any]:
    return run_query(sql, parameters or {}, DOCUMENTS)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # undefined (no `n`) and other types are not true: only the numbers compare
        ("SELECT VALUE c.id FROM c WHERE c.n < 3", ["a", "b"]),
        ("SELECT VALUE c.id FROM c WHERE c.n < 2", ["b"]),
        ("SELECT VALUE c.id FROM c WHERE c.n >= 2", ["a"]),
        ("SELECT VALUE c.id FROM c WHERE c.n = '1'", ["d"]),
        ("SELECT VALUE c.id FROM c WHERE NOT (c.n = 1)", ["a"]),
        ("SELECT VALUE c.id FROM c WHERE IS_DEFINED(c.b) AND NOT c.b", ["d"]),
        ("SELECT VALUE c.id FROM c WHERE ARRAY_CONTAINS(c.tags, 'y')", ["a"]),
        ("SELECT VALUE c.id FROM c WHERE c.n IN (1, 2)", ["a", "b"]),
        ("SELECT VALUE c.id FROM c WHERE c.n BETWEEN 1 AND 1", ["b"]),
        ("SELECT VALUE c.id FROM c WHERE STARTSWITH(c.s, 'B', true)", ["a"]),
        # ORDER BY across types: undefined, null, booleans, numbers, strings
        ("SELECT VALUE c.id FROM c ORDER BY c.n", ["c", "e", "b", "a", "d"]),
        ("SELECT VALUE c.id FROM c ORDER BY c.n DESC", ["d", "a", "b", "e", "c"]),
        # TOP and OFFSET LIMIT count results: an undefined VALUE is none
        ("SELECT TOP 1 VALUE c.b FROM c", [True]),
        ("SELECT VALUE c.s FROM c ORDER BY c.s OFFSET 1 LIMIT 1", ["b"]),
        # a projection drops what is undefined; unnamed items are $1, $2, ...
        ("SELECT c.id, c.o.k FROM c WHERE c.id = 'a'", [{"id": "a", "k": 1}]),
        ("SELECT c.n + 1, c['s'] FROM c WHERE c.id = 'a'", [{"$1": 3, "s": "b"}]),
        ("SELECT c.id FROM c WHERE c.id = 'c'", [{"id": "c"}]),
        # aggregates fold the rows; AVG of nothing is undefined (no result)
        ("SELECT VALUE COUNT(1) FROM c", [5]),
        ("SELECT VALUE SUM(c.n) FROM c WHERE IS_NUMBER(c.n)", [3]),
        ("SELECT VALUE SUM(c.n) FROM c", []),  # a string or null among them: undefined
        ("SELECT COUNT(1) AS n, MAX(c.s) AS top FROM c", [{"n": 5, "top": "c"}]),
        ("SELECT VALUE AVG(c.missing) FROM c", []),
        ("SELECT TOP 0 COUNT(1) AS n FROM c", []),
        # no FROM: evaluated once; strings counted in UTF-16 code units
        ("SELECT VALUE LENGTH('😀')", [2]),
        ("SELECT VALUE 7 / 2", [3.5]),
        # NOT binds before a comparison: (NOT c.b) = true
        ("SELECT VALUE c.id FROM c WHERE NOT c.b = true", ["d"]),
    ],
)
def test_a_query_answers_as_cosmos_db_does(sql: str, expected: list[Any]) -> None:
    assert ids(sql) == expected


def test_parameters_are_named_with_their_at_sign() -> None:
    sql = "SELECT VALUE c.id FROM c WHERE c.n >= @low AND ARRAY_LENGTH(c.tags) > @size"
    assert ids(sql, {"@low": 1, "@size": 1}) == ["a"]
    assert ids("SELECT TOP @n VALUE c.id FROM c", {"@n": 2}) == ["a", "b"]


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT * FROM c JOIN t IN c.tags", "JOIN is not served"),
        ("SELECT DISTINCT c.s FROM c", "DISTINCT is not served"),
        ("SELECT c.s, COUNT(1) FROM c GROUP BY c.s", "GROUP BY is not served"),
        ("SELECT VALUE t FROM t IN c.tags", "FROM <alias> IN <array>"),
        ("SELECT VALUE udf.f(c) FROM c", "not a query of the subset"),
        ("SELECT VALUE @missing FROM c", "the parameter @missing is not given"),
        ("SELECT VALUE FLOOR(c.n) FROM c", "the function FLOOR is not served"),
        ("SELECT VALUE c.id FROM c ORDER BY c.n * 2", "ORDER BY sorts by a property"),
        ("SELECT VALUE c.n / 0 FROM c WHERE c.id = 'a'", "a number JSON cannot carry"),
        ("SELECT VALUE c FROM c WHERE", "not a query of the subset"),
    ],
)
def test_what_is_not_served_is_refused_by_name(sql: str, named: str) -> None:
    with pytest.raises(QueryUnsupported) as refused:
        ids(sql)
    assert named in str(refused.value)


def test_an_aggregate_without_value_across_partitions_is_refused_as_the_sdk_refuses_it() -> None:
    sql = "SELECT COUNT(1) AS n FROM c"
    assert run_query(sql, {}, DOCUMENTS, cross_partition=False) == [{"n": 5}]
    with pytest.raises(QueryUnsupported, match="Cross partition query only supports 'VALUE"):
        run_query(sql, {}, DOCUMENTS, cross_partition=True)
    assert run_query("SELECT VALUE COUNT(1) FROM c", {}, DOCUMENTS, cross_partition=True) == [5]


def test_the_documents_are_read_not_changed() -> None:
    documents = [{"id": "a", "o": {"k": 1}}]
    run_query("SELECT VALUE c.o FROM c ORDER BY c.id", {}, iter(documents))
    assert documents == [{"id": "a", "o": {"k": 1}}]


def test_the_public_names_are_the_api() -> None:
    assert sorted(cosmos_sql.__all__) == ["QueryUnsupported", "__version__", "run_query"]
    assert issubclass(QueryUnsupported, ValueError)
