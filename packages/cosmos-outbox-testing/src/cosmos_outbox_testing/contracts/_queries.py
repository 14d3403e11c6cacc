"""The queries' suite (`cosmos_outbox.ports.DocumentQueries`: what the operators and the releases
ask of the store, and an app's own queries): a document by type and id whatever its partition
(`find`), the documents of a type (`of_type`, `page_of_type`), and Cosmos DB SQL with parameters,
in one partition (`partition_key=`) or across partitions, whole (`query`) or a page at a time
(`query_page`):
projections, VALUE, ORDER BY, TOP, OFFSET LIMIT, aggregates, the operators and system functions
apps use, undefined and types across comparisons, and the errors (a query refused, a token not
the store's). Every cross-partition query is scoped to the test's own documents (a `suite`
field), so a world may share its container."""

# ruff: noqa: S608 - the suite builds its queries from constants of its own, never input

from __future__ import annotations

from typing import Any

import pytest

from cosmos_outbox.errors import InvalidContinuationError, InvalidQueryError
from cosmos_outbox.ports import Page, QueryParameters
from cosmos_outbox_testing.contracts._worlds import StoreWorld, Suite, plain, unique

#: What the loans of the tests hold: (member, id, status, dueAt, fine, tags); one loan has no
#: fine (undefined), one a null fine, one a fine that is text.
_LOANS: list[tuple[str, str, str, str, Any, list[str]]] = [
    ("m1", "l1", "open", "2026-03-01T10:00:00Z", 0, ["book"]),
    ("m1", "l2", "open", "2026-03-05T10:00:00Z", 3, ["book", "late"]),
    ("m1", "l3", "returned", "2026-02-20T10:00:00Z", None, ["dvd"]),
    ("m2", "l4", "open", "2026-02-28T10:00:00Z", 7, []),
    ("m2", "l5", "lost", "2026-01-15T10:00:00Z", "unpaid", ["book"]),
    ("m3", "l6", "open", "2026-04-01T10:00:00Z", ..., ["Book"]),
]


class _Loans:
    """One test's loans: their partitions (members, the suite made unique) and how to query."""

    def __init__(self, world: StoreWorld) -> None:
        self.world = world
        self.suite = unique("suite")
        for member, loan_id, status, due, fine, tags in _LOANS:
            document: dict[str, Any] = {
                "id": loan_id,
                "partitionKey": self.member(member),
                "type": "loan",
                "suite": self.suite,
                "memberId": self.member(member),
                "status": status,
                "dueAt": due,
                "tags": tags,
                "title": f"Title of {loan_id}",
            }
            if fine is not ...:
                document["fine"] = fine
            world.plant(document)

    def member(self, name: str) -> str:
        return f"{name}-{self.suite}"

    def query(
        self, sql: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[Any]:
        """The results of `sql` (`@suite` given: the test's own documents)."""
        found: list[Any] = self.world.run(
            self.world.async_store.query(
                sql, self.parameters(parameters), partition_key=partition_key
            )
        )
        return found

    def page(self, sql: str, **options: Any) -> Page[Any]:
        """A page of `sql`'s results (`query_page`'s options: page_size, continuation, ...)."""
        store = self.world.async_store
        found: Page[Any] = self.world.run(store.query_page(sql, self.parameters(None), **options))
        return found

    def parameters(self, parameters: QueryParameters) -> QueryParameters:
        if parameters is None:
            return [{"name": "@suite", "value": self.suite}]
        if isinstance(parameters, dict):
            return {"@suite": self.suite, **parameters}
        return [{"name": "@suite", "value": self.suite}, *parameters]

    def ids(
        self, sql: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[str]:
        return [str(r) for r in self.query(sql, parameters, partition_key=partition_key)]

    def where(self, clause: str) -> list[str]:
        """The ids of the test's loans `clause` keeps, sorted."""
        return sorted(self.ids(f"SELECT VALUE c.id FROM c WHERE {_MINE} AND ({clause})"))


_MINE = "c.suite = @suite"


class QueryContract(Suite[StoreWorld]):
    """The queries of the store (`DocumentQueries`), as Cosmos DB answers them: the typed
    lookups the operators and the releases make, and an app's own queries."""

    @pytest.fixture
    def loans(self, world: StoreWorld) -> _Loans:
        return _Loans(world)

    def test_a_parameterised_query_in_one_partition_sees_that_partition_only(
        self, loans: _Loans
    ) -> None:
        """The library's timer: open loans due before now, per member, parameters in the SDK's
        shape or as a mapping."""
        sql = "SELECT * FROM c WHERE c.status = 'open' AND c.dueAt < @now"
        found = loans.query(
            sql,
            [{"name": "@now", "value": "2026-03-02T00:00:00Z"}],
            partition_key=loans.member("m1"),
        )
        assert [plain(d)["id"] for d in found] == ["l1"]
        assert plain(found[0]) == {
            "id": "l1",
            "partitionKey": loans.member("m1"),
            "type": "loan",
            "suite": loans.suite,
            "memberId": loans.member("m1"),
            "status": "open",
            "dueAt": "2026-03-01T10:00:00Z",
            "fine": 0,
            "tags": ["book"],
            "title": "Title of l1",
        }
        assert (
            loans.query(sql, {"@now": "2026-03-02T00:00:00Z"}, partition_key=loans.member("m3"))
            == []
        )

    def test_a_cross_partition_query_sees_every_partition(self, loans: _Loans) -> None:
        sql = f"SELECT VALUE c.id FROM c WHERE {_MINE} AND c.status = 'open' AND c.dueAt < @now"
        assert sorted(loans.ids(sql, {"@now": "2026-03-02T00:00:00Z"})) == ["l1", "l4"]

    def test_projections_name_their_fields_and_leave_out_what_is_undefined(
        self, loans: _Loans
    ) -> None:
        found = loans.query(
            "SELECT c.id, c.fine, c.status AS state, c.tags[0] AS firstTag, "
            '{"due": c.dueAt, "none": c.missing} AS due, LENGTH(c.id) FROM c '
            "WHERE c.id = 'l3'",
            partition_key=loans.member("m1"),
        )
        assert found == [
            {
                "id": "l3",
                "fine": None,
                "state": "returned",
                "firstTag": "dvd",
                "due": {"due": "2026-02-20T10:00:00Z"},
                "$1": 2,
            }
        ]
        assert loans.query(
            "SELECT c.fine, c.id FROM c WHERE c.id = 'l6'", partition_key=loans.member("m3")
        ) == [{"id": "l6"}]
        assert (
            loans.query(
                "SELECT VALUE c.fine FROM c WHERE c.id = 'l6'", partition_key=loans.member("m3")
            )
            == []
        )

    def test_order_by_top_and_offset_limit(self, loans: _Loans) -> None:
        mine = f"SELECT VALUE c.id FROM c WHERE {_MINE}"
        assert loans.ids(f"{mine} ORDER BY c.dueAt") == ["l5", "l3", "l4", "l1", "l2", "l6"]
        assert loans.ids(f"{mine} ORDER BY c.dueAt DESC OFFSET 1 LIMIT 2") == ["l2", "l1"]
        assert loans.ids(f"SELECT TOP 2 VALUE c.id FROM c WHERE {_MINE} ORDER BY c.id DESC") == [
            "l6",
            "l5",
        ]
        assert loans.ids(
            f"{mine} ORDER BY c.id OFFSET @skip LIMIT @take", {"@skip": 4, "@take": 10}
        ) == ["l5", "l6"]
        in_m1 = "SELECT VALUE c.id FROM c ORDER BY c.dueAt DESC"
        assert loans.ids(in_m1, partition_key=loans.member("m1")) == ["l2", "l1", "l3"]

    def test_order_by_puts_undefined_then_null_then_numbers_then_strings(
        self, loans: _Loans
    ) -> None:
        """Types across ORDER BY, as Cosmos DB sorts them: a loan without a fine first, then
        the null fine, the numbers, the text; DESC the other way round."""
        sql = f"SELECT VALUE c.id FROM c WHERE {_MINE} ORDER BY c.fine"
        assert loans.ids(sql) == ["l6", "l3", "l1", "l2", "l4", "l5"]
        assert loans.ids(f"{sql} DESC") == ["l5", "l4", "l2", "l1", "l3", "l6"]

    def test_counts_and_aggregates(self, loans: _Loans) -> None:
        assert loans.query(f"SELECT VALUE COUNT(1) FROM c WHERE {_MINE}") == [6]
        assert loans.query(f"SELECT VALUE COUNT(1) FROM c WHERE {_MINE} AND c.status = 'gone'") == [
            0
        ]
        assert loans.query(f"SELECT VALUE COUNT(c.fine) FROM c WHERE {_MINE}") == [5]
        assert loans.query("SELECT COUNT(1) AS loans FROM c", partition_key=loans.member("m1")) == [
            {"loans": 3}
        ]
        numbers = f"FROM c WHERE {_MINE} AND IS_NUMBER(c.fine)"
        assert loans.query(f"SELECT VALUE SUM(c.fine) {numbers}") == [10]
        assert loans.query(f"SELECT VALUE MAX(c.fine) {numbers}") == [7]
        assert loans.query(f"SELECT VALUE MIN(c.dueAt) FROM c WHERE {_MINE}") == [
            "2026-01-15T10:00:00Z"
        ]
        [average] = loans.query(f"SELECT VALUE AVG(c.fine) {numbers}")
        assert average == pytest.approx(10 / 3)

    def test_operators_and_system_functions(self, loans: _Loans) -> None:
        ids = loans.where
        assert ids("c.status IN ('lost', 'returned')") == ["l3", "l5"]
        assert ids("NOT (c.status IN ('open'))") == ["l3", "l5"]
        assert ids("c.fine BETWEEN 1 AND 7") == ["l2", "l4"]
        assert ids("NOT (c.status = 'open') OR c.fine = 7") == ["l3", "l4", "l5"]
        assert ids("c.status != 'open' AND c.status <> 'lost'") == ["l3"]
        assert ids("NOT IS_DEFINED(c.fine) OR IS_NULL(c.fine)") == ["l3", "l6"]
        assert ids("ARRAY_CONTAINS(c.tags, 'book')") == ["l1", "l2", "l5"]
        assert ids("ARRAY_CONTAINS(['l2', 'l4'], c.id)") == ["l2", "l4"]
        assert ids("ARRAY_LENGTH(c.tags) = 0") == ["l4"]
        assert ids("STARTSWITH(c.dueAt, '2026-03')") == ["l1", "l2"]
        assert ids("ENDSWITH(c.title, 'l6') OR CONTAINS(c.title, 'of l5')") == ["l5", "l6"]
        assert ids("LOWER(c.tags[0]) = 'book' AND UPPER(c.status) = 'OPEN'") == ["l1", "l2", "l6"]
        assert ids("c.fine * 2 + 1 > 6 AND c.fine % 2 = 1") == ["l2", "l4"]
        assert ids("CONCAT(c.status, '-', c.id) = 'lost-l5' OR c.id || '!' = 'l1!'") == ["l1", "l5"]

    def test_comparisons_across_types_are_undefined_never_true(self, loans: _Loans) -> None:
        """`c.fine > 1` is undefined for the text fine, the null one and the missing one: the
        WHERE clause keeps none of them, and NOT of undefined is undefined too."""

        ids = loans.where
        assert ids("c.fine > 1") == ["l2", "l4"]
        assert ids("NOT (c.fine > 1)") == ["l1"]
        assert ids("c.fine = null") == ["l3"]
        assert ids("c.fine > 'a'") == ["l5"]
        assert ids("c.tags = ['book', 'late']") == ["l2"]

    def test_equality_across_types_is_undefined_under_not_too(self, loans: _Loans) -> None:
        """`=`, `!=`, IN and BETWEEN are undefined across types and for a missing value
        (Cosmos DB's table of them), so NOT of them is undefined too: the null, text and
        missing fines are neither "= 0" nor "!= 0"."""

        ids = loans.where
        assert ids("c.fine != 0") == ["l2", "l4"]
        assert ids("c.fine <> 0") == ["l2", "l4"]
        assert ids("NOT (c.fine = 0)") == ["l2", "l4"]
        assert ids("NOT (c.fine IN (0, 3))") == ["l4"]
        assert ids("NOT (c.fine BETWEEN 0 AND 3)") == ["l4"]

    def test_not_in_not_between_and_case_insensitive_text_tests(self, loans: _Loans) -> None:
        ids = loans.where
        assert ids("c.status NOT IN ('open', 'lost')") == ["l3"]
        assert ids("c.fine NOT BETWEEN 1 AND 7") == ["l1"]
        assert ids("STARTSWITH(c.tags[0], 'BOOK', true)") == ["l1", "l2", "l5", "l6"]
        assert ids("CONTAINS(c.title, 'OF L', true) AND ENDSWITH(c.id, '1', false)") == ["l1"]

    def test_pages_add_up_to_the_whole_query(self, loans: _Loans) -> None:
        for sql, partition in [
            (f"SELECT VALUE c.id FROM c WHERE {_MINE}", None),
            ("SELECT c.id, c.status FROM c ORDER BY c.dueAt", loans.member("m1")),
        ]:
            whole = loans.query(sql, partition_key=partition)
            pages: list[Any] = []
            token: str | None = None
            for _ in range(20):
                page = loans.page(sql, partition_key=partition, page_size=2, continuation=token)
                assert len(page.items) <= 2
                pages += page.items
                token = page.continuation_token
                if token is None:
                    break
            assert pages == whole and len(whole) in (3, 6)

    def test_a_query_the_store_refuses_is_an_invalid_query_error(self, loans: _Loans) -> None:
        with pytest.raises(InvalidQueryError):
            loans.query("SELECT * FROM c WHERE", partition_key=loans.member("m1"))
        with pytest.raises(InvalidQueryError):
            loans.query(f"SELECT COUNT(1) AS n FROM c WHERE {_MINE}")  # across partitions

    def test_a_continuation_token_the_store_did_not_issue_is_refused(self, loans: _Loans) -> None:
        with pytest.raises(InvalidContinuationError):
            loans.page(
                "SELECT VALUE c.id FROM c",
                partition_key=loans.member("m1"),
                page_size=2,
                continuation="not-a-token",
            )

    def test_find_gets_a_document_by_type_and_id_whatever_its_partition(
        self, world: StoreWorld
    ) -> None:
        kind = unique("note")
        _put(world, kind, "p1", "a")
        _put(world, "other-" + kind, "p2", "a")
        found = world.run(world.async_store.find(kind, "a"))
        assert found is not None and (found["partitionKey"], found["type"]) == (f"p1-{kind}", kind)
        assert found["_etag"]
        assert world.run(world.async_store.find(kind, "missing")) is None

    def test_of_type_lists_a_types_documents_in_one_partition_or_in_all(
        self, world: StoreWorld
    ) -> None:
        kind = unique("note")
        for partition, document_id in (("p1", "a"), ("p1", "b"), ("p2", "c")):
            _put(world, kind, partition, document_id)
        _put(world, "other-" + kind, "p1", "d")
        every = world.run(world.async_store.of_type(kind))
        assert sorted(d["id"] for d in every) == ["a", "b", "c"]
        one = world.run(world.async_store.of_type(kind, partition_key=f"p1-{kind}"))
        assert sorted(d["id"] for d in one) == ["a", "b"]

    def test_pages_of_a_type_list_each_document_once_then_end(self, world: StoreWorld) -> None:
        kind = unique("note")
        for n in range(5):
            _put(world, kind, f"p{n % 2}", f"d{n}")
        seen: list[str] = []
        token: str | None = None
        for _ in range(10):
            page = world.run(world.async_store.page_of_type(kind, page_size=2, continuation=token))
            assert len(page.items) <= 2
            seen += [d["id"] for d in page.items]
            token = page.continuation_token
            if token is None:
                break
        assert sorted(seen) == [f"d{n}" for n in range(5)]

    def test_a_page_token_of_a_type_the_store_did_not_issue_is_refused(
        self, world: StoreWorld
    ) -> None:
        with pytest.raises(InvalidContinuationError):
            world.run(
                world.async_store.page_of_type(
                    unique("note"), page_size=2, continuation="not-a-token"
                )
            )


def _put(world: StoreWorld, kind: str, partition: str, document_id: str) -> None:
    """A document of type `kind` in partition `<partition>-<kind>`."""
    world.plant({"id": document_id, "partitionKey": f"{partition}-{kind}", "type": kind})
