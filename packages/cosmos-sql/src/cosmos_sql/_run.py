"""A query of the subset (`_grammar`) run over documents, as Cosmos DB runs it: the WHERE clause
keeps what is true (not false, not undefined), ORDER BY sorts across types, TOP / OFFSET LIMIT
cut, the SELECT clause shapes each result (a projection drops what is undefined; VALUE drops an
undefined result), and aggregates fold the rows into one.

The syntax tree is compiled once per query and parameters into plain functions of the document
(`Compiled`); what the subset does not serve is refused while compiling, naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from lark import Token, Transformer, Tree, v_args
from lark.exceptions import VisitError

from cosmos_sql import _values as v
from cosmos_sql._grammar import parse, unquote
from cosmos_sql._values import UNDEFINED, QueryUnsupported

#: An expression, compiled: the value it has for one document (the FROM alias's value).
Expression = Callable[[Any], Any]


@dataclass(frozen=True)
class Compiled:
    """A query ready to run over documents."""

    where: Expression | None
    #: each ORDER BY expression and whether it sorts descending
    order: tuple[tuple[Expression, bool], ...]
    #: how many results are skipped, and at most how many are kept (None: all)
    skip: int
    take: int | None
    #: one result of a document (None: left out, a VALUE that is undefined)
    shape: Callable[[Any], Any] | None
    #: the aggregates' fold of the kept documents into the one result (VALUE or a projection)
    fold: Callable[[list[Any]], Any] | None
    #: whether the SELECT clause is made of aggregates without VALUE (refused across partitions)
    fields_aggregate: bool
    #: whether the query has a FROM clause (without one it is evaluated once, on nothing)
    has_source: bool = True

    def run(self, documents: Iterable[Any]) -> list[Any]:
        inputs = documents if self.has_source else [UNDEFINED]
        rows = [d for d in inputs if self.where is None or self.where(d) is True]
        for expression, descending in reversed(self.order):  # stable: the last key first
            rows.sort(
                key=lambda d, e=expression: v.sort_key(e(d)),  # type: ignore[misc]
                reverse=descending,
            )
        end = None if self.take is None else self.skip + self.take
        if self.fold is not None:
            result = self.fold(rows)
            found = ([] if result is UNDEFINED else [result])[self.skip : end]
        else:
            shape = self.shape
            assert shape is not None
            # TOP and OFFSET LIMIT count results: a VALUE that is undefined is none
            found = [r for r in (shape(d) for d in rows) if r is not UNDEFINED][self.skip : end]
        if not v.finite(found):
            raise QueryUnsupported(
                "a result holds a number JSON cannot carry (an infinity or NaN, as a division "
                "by zero makes): Cosmos DB answers such a query 400"
            )
        return found


def run_query(
    sql: str,
    parameters: Mapping[str, Any],
    documents: Iterable[Any],
    *,
    cross_partition: bool = False,
) -> list[Any]:
    """The results of `sql` over `documents` (JSON values: `dict`, `list`, `str`, `int`, `float`,
    `bool`, None), with `parameters` by name, `@` included (`{"@k": 1}`), as Cosmos DB evaluates
    the query. `cross_partition`: the documents are several partitions' (a query without a
    partition key), where Cosmos DB's SDK refuses an aggregate without VALUE.

    QueryUnsupported names what is not served, or what Cosmos DB refuses; a query is never
    answered another way."""
    compiled = compile_query(sql, parameters)
    if cross_partition and compiled.fields_aggregate:
        raise QueryUnsupported(
            "Cross partition query only supports 'VALUE <AggregateFunc>' "
            "for aggregates (Cosmos DB's SDK refuses it: write SELECT VALUE "
            "COUNT(1), or give a partition key)"
        )
    return compiled.run(documents)


def compile_query(sql: str, parameters: Mapping[str, Any]) -> Compiled:
    tree = parse(sql)
    # optional parts are None when absent (`maybe_placeholders`): lark's types do not say so
    top, selection, source, where, order, offset_limit = cast(list[Any], tree.children)
    alias = _alias(source)
    compiler = _Compiler(alias, parameters)
    skip, take = 0, None
    if top is not None:
        assert isinstance(top, Tree)
        take = compiler.count(top.children[0], "TOP")
    if offset_limit is not None:
        assert isinstance(offset_limit, Tree)
        if top is not None:
            raise QueryUnsupported("TOP with OFFSET LIMIT is refused: use one")
        skip = compiler.count(offset_limit.children[0], "OFFSET")
        take = compiler.count(offset_limit.children[1], "LIMIT")
    assert isinstance(selection, Tree)
    shape, fold, fields_aggregate = compiler.selection(selection, source is not None)
    sorts: list[tuple[Expression, bool]] = []
    if order is not None:
        assert isinstance(order, Tree)
        if fold is not None:
            raise QueryUnsupported("ORDER BY with an aggregate is not served")
        for sort in order.children:
            assert isinstance(sort, Tree)
            expression, direction = cast(list[Any], sort.children)
            if not _is_path(expression, alias):
                raise QueryUnsupported(
                    'ORDER BY sorts by a property of the document (c.a, c["a"], c.a[0]): Cosmos '
                    "DB refuses another expression (it could not be mapped to a document path)"
                )
            sorts.append(
                (compiler.expression(expression), str(direction or "asc").lower() == "desc")
            )
    kept = compiler.expression(where.children[0]) if isinstance(where, Tree) else None
    from_ = source is not None
    return Compiled(kept, tuple(sorts), skip, take, shape, fold, fields_aggregate, from_)


def _is_path(expression: Any, alias: str | None) -> bool:
    """Whether an expression is a property of the document: the FROM alias, then names and
    constant indices (`c.a.b`, `c["a"]`, `c.items[0]`), at least one."""
    steps = 0
    while isinstance(expression, Tree) and expression.data in ("member", "index"):
        if expression.data == "index":
            index = expression.children[1]
            if not (isinstance(index, Tree) and index.data in ("string", "number")):
                return False
            if index.data == "number" and not str(index.children[0]).isdigit():
                return False
        expression, steps = expression.children[0], steps + 1
    return (
        steps > 0
        and isinstance(expression, Tree)
        and expression.data == "reference"
        and str(expression.children[0]) == alias
    )


def _string_index(expression: Any) -> bool:
    """Whether an expression is a property named by a string (`c["name"]`): named so in a
    SELECT list, as `c.name` is."""
    return (
        isinstance(expression, Tree)
        and expression.data == "index"
        and isinstance(expression.children[1], Tree)
        and expression.children[1].data == "string"
    )


def _alias(source: Any) -> str | None:
    if source is None:
        return None
    container, alias = source.children
    return str(alias if alias is not None else container)


class _Compiler:
    """Compiles a query's clauses, knowing its FROM alias and its parameters."""

    def __init__(self, alias: str | None, parameters: Mapping[str, Any]) -> None:
        self.alias, self.parameters = alias, parameters
        self.expressions = _Expressions(self)

    def count(self, node: Any, clause: str) -> int:
        value = node.children[0]
        value = int(value) if node.data == "integer" else self.value_of(str(value))
        if type(value) is not int or value < 0:
            raise QueryUnsupported(f"{clause} takes a number >= 0, not {value!r}")
        return value

    def value_of(self, name: str) -> Any:
        if name not in self.parameters:
            raise QueryUnsupported(f"the parameter {name} is not given")
        return self.parameters[name]

    def expression(self, node: Any) -> Expression:
        if isinstance(node, Token):  # a keyword's token in an optional place: never a value
            raise QueryUnsupported(f"unexpected {node!s}")
        try:
            compiled: Expression = self.expressions.transform(node)
        except VisitError as error:  # lark's wrapping of what a node's method raised
            raise error.orig_exc from None
        return compiled

    def selection(
        self, node: Tree[Token], has_source: bool
    ) -> tuple[Callable[[Any], Any] | None, Callable[[list[Any]], Any] | None, bool]:
        """(the shape of one result, or the aggregates' fold; whether it is aggregates
        without VALUE)."""
        if node.data == "select_all":
            if not has_source:
                raise QueryUnsupported("SELECT * needs a FROM clause")
            return (lambda document: document), None, False
        if node.data == "select_value":
            aggregate = self.aggregate(node.children[0])
            if aggregate is not None:
                return None, aggregate, False
            return self.expression(node.children[0]), None, False
        named = _named(node)
        folds = {name: self.aggregate(e) for name, e in named.items()}
        if any(f is not None for f in folds.values()):
            if not all(f is not None for f in folds.values()):
                raise QueryUnsupported(
                    "a SELECT list mixing aggregates and other values needs "
                    "GROUP BY, which is not served"
                )
            return None, _fields({n: cast(Expression, f) for n, f in folds.items()}), True
        return _fields({name: self.expression(e) for name, e in named.items()}), None, False

    def aggregate(self, node: Any) -> Callable[[list[Any]], Any] | None:
        """The fold of an aggregate call (`COUNT(1)`, `SUM(c.n)`, ...), None for another
        expression."""
        if not (
            isinstance(node, Tree)
            and node.data == "call"
            and str(node.children[0]).upper() in v.AGGREGATES
        ):
            return None
        name = str(node.children[0]).upper()
        arguments = [a for a in node.children[1:] if a is not None]
        if len(arguments) != 1:
            raise QueryUnsupported(f"{name} takes one argument")
        argument = self.expression(arguments[0])
        return lambda rows: v.aggregate(name, [argument(row) for row in rows])


def _named(selection: Tree[Token]) -> dict[str, Any]:
    """A SELECT list's expressions by the name each result gives it: its alias, else its
    property's name (`c.name`, `c["name"]`, `c`), else `$1`, `$2`, ... in order."""
    named: dict[str, Any] = {}
    unnamed = 0
    for projection in selection.children:
        assert isinstance(projection, Tree)
        expression, alias = cast(list[Any], projection.children)
        if alias is not None:
            name = str(alias)
        elif isinstance(expression, Tree) and expression.data == "member":
            name = str(expression.children[1])
        elif _string_index(expression):
            name = unquote(str(expression.children[1].children[0]))
        elif isinstance(expression, Tree) and expression.data == "reference":
            name = str(expression.children[0])
        else:
            unnamed += 1
            name = f"${unnamed}"
        if name in named:
            raise QueryUnsupported(f"the name {name!r} is given twice in the SELECT list")
        named[name] = expression
    return named


def _fields(named: Mapping[str, Callable[[Any], Any]]) -> Callable[[Any], dict[str, Any]]:
    """An object of each name's value (of a document, or of the rows), what is undefined left
    out."""
    return lambda given: {
        name: value for name, each in named.items() if (value := each(given)) is not UNDEFINED
    }


def _constant(value: Any) -> Expression:
    return lambda _document: value


def _defined(items: Sequence[Expression | None]) -> list[Expression]:
    """The expressions of a list (an empty one is a placeholder None)."""
    return [item for item in items if item is not None]


#: The literals without a text of their own.
_KEYWORDS: Final = {"true": True, "false": False, "null": None, "undefined": UNDEFINED}
#: The nodes of one operand after its operator's token (`+ x`: x, where it is a number), and
#: of two operands, each by what it makes of its operands' values.
_UNARY: Final[dict[str, Callable[[Any], Any]]] = {
    "unary": lambda x: x if v.is_number(x) else UNDEFINED,
    "negative": v.negative,
    "not_": v.logical_not,
}
_BINARY: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "and_": v.logical_and,
    "or_": v.logical_or,
    "text_concat": v.FUNCTIONS["CONCAT"][2],
}


@v_args(inline=True)
class _Expressions(Transformer[Token, Expression]):
    """An expression's syntax tree compiled from the leaves up, each node by the method named
    after it (lark's `Transformer`, its children compiled first), into a function of the
    document (the FROM alias's value)."""

    def __init__(self, compiler: _Compiler) -> None:
        super().__init__(visit_tokens=False)
        self.compiler = compiler

    def __default__(self, data: str, children: list[Any], meta: Any) -> Expression:
        if data in _KEYWORDS:
            return _constant(_KEYWORDS[data])
        if data in _UNARY:
            one, operand = _UNARY[data], children[-1]
            return lambda document: one(operand(document))
        if data in _BINARY:
            two, (left, right) = _BINARY[data], children
            return lambda document: two(left(document), right(document))
        raise QueryUnsupported(f"{data} is not served")

    def number(self, text: Token) -> Expression:
        return _constant(int(text) if text.isdigit() else float(text))

    def string(self, text: Token) -> Expression:
        return _constant(unquote(text))

    def parameter(self, name: Token) -> Expression:
        return _constant(self.compiler.value_of(str(name)))

    def reference(self, name: Token) -> Expression:
        if name != self.compiler.alias:
            raise QueryUnsupported(
                f"the identifier {str(name)!r} is not the FROM alias "
                f"({self.compiler.alias or 'no FROM clause'})"
            )
        return lambda document: document

    def member(self, target: Expression, name: Token) -> Expression:
        key = str(name)
        return lambda document: v.member(target(document), key)

    def index(self, target: Expression, key: Expression) -> Expression:
        return lambda document: v.member(target(document), key(document))

    def compare(self, left: Expression, operator: Token, right: Expression) -> Expression:
        if operator == "=":
            return lambda document: v.equal(left(document), right(document))
        named = "!=" if operator == "<>" else str(operator)
        return lambda document: v.compare(named, left(document), right(document))

    def arithmetic(self, left: Expression, operator: Token, right: Expression) -> Expression:
        named = str(operator)
        return lambda document: v.arithmetic(named, left(document), right(document))

    def in_(self, target: Expression, negated: Token | None, *candidates: Expression) -> Expression:
        """`x [NOT] IN (a, b, ...)`: whether `x = a OR x = b ...` (undefined when no
        comparison is defined and none is true)."""

        def test(document: Any) -> Any:
            value = target(document)
            found: Any = False
            for candidate in candidates:
                found = v.logical_or(found, v.equal(value, candidate(document)))
                if found is True:
                    break
            return v.logical_not(found) if negated is not None else found

        return test

    def between(
        self, target: Expression, negated: Token | None, low: Expression, high: Expression
    ) -> Expression:
        def test(document: Any) -> Any:
            value = target(document)
            found = v.logical_and(
                v.compare(">=", value, low(document)), v.compare("<=", value, high(document))
            )
            return v.logical_not(found) if negated is not None else found

        return test

    def conditional(self, test: Expression, then: Expression, otherwise: Expression) -> Expression:
        return lambda document: then(document) if test(document) is True else otherwise(document)

    def coalesce(self, left: Expression, right: Expression) -> Expression:
        return lambda document: (
            value if (value := left(document)) is not UNDEFINED else right(document)
        )

    def array(self, *items: Expression | None) -> Expression:
        defined = _defined(items)
        return lambda document: [
            value for item in defined if (value := item(document)) is not UNDEFINED
        ]

    def pair(self, key: Token, value: Expression) -> tuple[str, Expression]:
        text = str(key)
        return (unquote(text) if text[0] in "'\"" else text), value

    def object(self, *pairs: tuple[str, Expression] | None) -> Expression:
        return _fields(dict(pair for pair in pairs if pair is not None))

    def call(self, name: Token, *arguments: Expression | None) -> Expression:
        upper = name.upper()
        if upper in v.AGGREGATES:
            raise QueryUnsupported(
                f"the aggregate {upper} inside an expression is not served "
                "(only as a SELECT item or after VALUE)"
            )
        found = v.FUNCTIONS.get(upper)
        if found is None:
            raise QueryUnsupported(
                f"the function {name!s} is not served (cosmos-sql serves "
                f"{', '.join(sorted(v.FUNCTIONS))} and the aggregates "
                f"{', '.join(sorted(v.AGGREGATES))})"
            )
        least, most, function = found
        given = _defined(arguments)
        if not least <= len(given) <= most:
            raise QueryUnsupported(
                f"{upper} takes {least}" + (f" to {most}" if most > least else "") + " arguments"
            )
        return lambda document: function(*(argument(document) for argument in given))
