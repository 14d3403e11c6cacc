"""The in-memory store against the Cosmos DB adapter on funcstack's endpoint, through the SDK:
what packages/cosmos-sql/tests/test_engines_agree.py (the two engines held equal over its whole
subset, in one partition, in-process) does not see. The same documents in both stores, across
two partitions, the same query through `InMemoryStore.query` and `CosmosDocumentStore.query`
(parameters as the adapter passes them; one partition or across, where the SDK fetches the
query plan and merges the ranges' answers: aggregates, ORDER BY across types, OFFSET LIMIT), the
same results; a query the service refuses, refused by both. A handful of examples each: the
breadth of the language is the other test's."""

# ruff: noqa: S608 - the queries are built from the strategies' own constants

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from azure_stack import DATABASE, verified
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.errors import InvalidQueryError
from cosmos_outbox_testing import InMemoryStore

if TYPE_CHECKING:
    from funcstack import LocalStack

pytestmark = pytest.mark.integration

#: The values a document's fields and a query's literals take: a few of each JSON type, so that
#: comparisons meet equal values, neighbours and other types.
SCALARS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.5, -1.5, 2.0]),
    st.sampled_from(["", "a", "ab", "B", "b"]),
    st.booleans(),
    st.none(),
)
FIELDS = ("n", "s", "flag")


@st.composite
def documents(draw: st.DrawFn) -> list[dict[str, Any]]:
    found = []
    for number in range(draw(st.integers(1, 8))):
        document: dict[str, Any] = {
            "id": f"d{number}",
            "partitionKey": draw(st.sampled_from(["p1", "p2"])),
        }
        for field in FIELDS:
            if draw(st.booleans()):
                document[field] = draw(SCALARS)
        document["tags"] = draw(st.lists(st.sampled_from(["a", "b", "c"]), max_size=3))
        found.append(document)
    return found


def literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


def field() -> st.SearchStrategy[str]:
    return st.sampled_from([f"c.{name}" for name in FIELDS])


def equalities() -> st.SearchStrategy[str]:
    """`=`, `!=`, IN, BETWEEN and their NOT forms: undefined across types in Cosmos DB (so NOT
    of them is undefined too)."""
    equal = st.builds(
        lambda f, op, v: f"{f} {op} {literal(v)}",
        field(),
        st.sampled_from(["=", "!=", "<>"]),
        SCALARS,
    )
    parameter = st.builds(lambda f: f"{f} = @v", field())
    membership = st.builds(
        lambda f, negated, vs: (
            f"{f} {'NOT IN' if negated else 'IN'} ({', '.join(literal(v) for v in vs)})"
        ),
        field(),
        st.booleans(),
        st.lists(SCALARS, min_size=1, max_size=3),
    )
    between = st.builds(
        lambda f, negated, a, b: (
            f"{f} {'NOT BETWEEN' if negated else 'BETWEEN'} {literal(a)} AND {literal(b)}"
        ),
        st.sampled_from(["ARRAY_LENGTH(c.tags)", "LENGTH(c.s)", "c.n * 1", "c.n", "c.s", "c.flag"]),
        st.booleans(),
        SCALARS,
        SCALARS,
    )
    return st.one_of(equal, parameter, membership, between)


def orderings() -> st.SearchStrategy[str]:
    """Comparisons, arithmetic and the system functions: the same on both, under NOT too."""
    comparison = st.builds(
        lambda f, op, v: f"{f} {op} {literal(v)}",
        field(),
        st.sampled_from(["<", "<=", ">", ">="]),
        SCALARS,
    )
    parameter = st.builds(lambda f: f"{f} > @v", field())
    arithmetic = st.builds(
        lambda op, k, v: f"c.n {op} {k} > {v}",
        st.sampled_from("+-*"),
        st.integers(1, 2),
        st.integers(-2, 4),
    )
    functions = st.sampled_from(
        [
            "IS_DEFINED(c.n)",
            "IS_NULL(c.s)",
            "IS_STRING(c.s)",
            "IS_NUMBER(c.n)",
            "IS_BOOL(c.flag)",
            "ARRAY_CONTAINS(c.tags, 'a')",
            "ARRAY_LENGTH(c.tags) > 1",
            "STARTSWITH(c.s, 'a')",
            "STARTSWITH(c.s, 'A', true)",
            "ENDSWITH(c.s, 'B', true)",
            "CONTAINS(c.s, 'b', false)",
            "ENDSWITH(c.s, 'b')",
            "CONTAINS(c.s, 'b')",
            "LOWER(c.s) > 'a'",
            "UPPER(c.s) < 'B'",
            "LENGTH(c.s) >= 1",
            "c.flag",
            "c.s || 'x' > 'ax'",
        ]
    )
    return st.one_of(comparison, parameter, arithmetic, functions)


def filters() -> st.SearchStrategy[str]:
    def both(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda a, b: f"({a}) AND ({b})", inner, inner),
            st.builds(lambda a, b: f"({a}) OR ({b})", inner, inner),
        )

    return st.recursive(
        st.one_of(orderings(), equalities()),
        lambda inner: st.one_of(both(inner), st.builds(lambda a: f"NOT ({a})", inner)),
        max_leaves=4,
    )


SELECTS = st.sampled_from(
    [
        "SELECT VALUE c.id FROM c",
        "SELECT c.id, c.n, c.s AS text FROM c",
        "SELECT * FROM c",
        "SELECT VALUE COUNT(1) FROM c",
    ]
)


@pytest.fixture(scope="module")
def container(funcstack_services: LocalStack) -> Iterator[Any]:
    """A container for the module: each example's documents are its own (a `run` field and
    partitions of their own)."""
    from azure.cosmos import CosmosClient, PartitionKey

    name = f"compared-{uuid.uuid4().hex[:8]}"
    client = CosmosClient.from_connection_string(
        funcstack_services.cosmos_connection_string, **verified(funcstack_services)
    )
    database = client.get_database_client(DATABASE)
    yield database.create_container(id=name, partition_key=PartitionKey(path="/partitionKey"))
    database.delete_container(name)


def _sorted(rows: list[Any]) -> list[Any]:
    plain = [
        {k: v for k, v in r.items() if not k.startswith("_")} if isinstance(r, dict) else r
        for r in rows
    ]
    return sorted(plain, key=repr)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    stored=documents(),
    where=filters(),
    select=SELECTS,
    value=SCALARS,
    scope=st.sampled_from(["p1", "p2", None]),
)
def test_the_in_memory_store_answers_a_query_as_cosmos_db_does(
    container: Any,
    stored: list[dict[str, Any]],
    where: str,
    select: str,
    value: Any,
    scope: str | None,
) -> None:
    run = uuid.uuid4().hex[:10]
    cosmos, memory = CosmosDocumentStore(container), InMemoryStore()
    for document in stored:
        document = {**document, "run": run, "partitionKey": f"{document['partitionKey']}-{run}"}
        cosmos.upsert(document)
        memory.put(document)
    sql = f"{select} WHERE c.run = @run AND ({where})"
    parameters = {"@run": run, "@v": value}
    partition = None if scope is None else f"{scope}-{run}"
    try:
        expected = cosmos.query(sql, parameters, partition_key=partition)
    except InvalidQueryError:
        with pytest.raises(InvalidQueryError):
            memory.query(sql, parameters, partition_key=partition)
        return
    assert _sorted(memory.query(sql, parameters, partition_key=partition)) == _sorted(expected), sql


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    stored=documents(),
    descending=st.booleans(),
    by=st.sampled_from(["c.n", "c.s", "c.id"]),
    window=st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(1, 4))),
    scope=st.sampled_from(["p1", None]),
)
def test_the_in_memory_store_orders_and_cuts_as_cosmos_db_does(
    container: Any,
    stored: list[dict[str, Any]],
    descending: bool,
    by: str,
    window: tuple[int, int] | None,
    scope: str | None,
) -> None:
    """ORDER BY across types (undefined first, then null, booleans, numbers, strings) in one
    partition and across them (the SDK merges the partitions' pages), with OFFSET LIMIT. The
    value alone is selected: the order of ties is the store's own."""
    run = uuid.uuid4().hex[:10]
    cosmos, memory = CosmosDocumentStore(container), InMemoryStore()
    for document in stored:
        document = {**document, "run": run, "partitionKey": f"{document['partitionKey']}-{run}"}
        cosmos.upsert(document)
        memory.put(document)
    # a projection, not VALUE: the SDK drops a VALUE of 0 (falsy) from a cross-partition
    # query's OFFSET LIMIT page (azure-cosmos 4.x's merge, against any endpoint)
    sql = f"SELECT {by} AS v FROM c WHERE c.run = @run ORDER BY {by}{' DESC' if descending else ''}"
    if window is not None:
        sql += f" OFFSET {window[0]} LIMIT {window[1]}"
    partition = None if scope is None else f"{scope}-{run}"
    expected = cosmos.query(sql, {"@run": run}, partition_key=partition)
    assert memory.query(sql, {"@run": run}, partition_key=partition) == expected, sql
