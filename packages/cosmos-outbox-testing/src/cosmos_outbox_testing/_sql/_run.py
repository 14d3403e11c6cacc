"""A query of the subset (`_grammar`) run over documents, as Cosmos DB runs it: the WHERE clause
keeps what is true (not false, not undefined), ORDER BY sorts across types, TOP / OFFSET LIMIT
cut, the SELECT clause shapes each result (a projection drops what is undefined; VALUE drops an
undefined result), and aggregates fold the rows into one.

The syntax tree is compiled once per query and parameters into plain functions of the document
(`Compiled`); what the subset does not serve is refused while compiling, naming it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from lark import Token, Tree

from cosmos_outbox_testing._sql import _values as v
from cosmos_outbox_testing._sql._grammar import parse, unquote
from cosmos_outbox_testing._sql._values import UNDEFINED, QueryUnsupported

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
    sql: str, parameters: Mapping[str, Any], documents: Iterable[Any], *, cross_partition: bool
) -> list[Any]:
    """The results of `sql` over `documents`, with `parameters` (by name, `@` included).
    QueryUnsupported names what is not served, or what Cosmos DB refuses
    (a cross-partition aggregate without VALUE, as its SDK does)."""
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
    compiler = _Compiler(alias, parameters, sql)
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
    return Compiled(
        where=(compiler.expression(where.children[0]) if isinstance(where, Tree) else None),
        order=tuple(sorts),
        skip=skip,
        take=take,
        shape=shape,
        fold=fold,
        fields_aggregate=fields_aggregate,
        has_source=source is not None,
    )


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
    """Compiles a query's syntax tree, knowing its FROM alias and its parameters."""

    def __init__(self, alias: str | None, parameters: Mapping[str, Any], sql: str) -> None:
        self.alias, self.parameters, self.sql = alias, parameters, sql

    # -- clauses ----------------------------------------------------------------------------

    def count(self, node: Any, clause: str) -> int:
        value = (
            int(node.children[0])
            if node.data == "integer"
            else self.parameter(str(node.children[0]))
        )
        if type(value) is not int or value < 0:
            raise QueryUnsupported(f"{clause} takes a number >= 0, not {value!r}")
        return value

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
        names: list[str] = []
        expressions: list[Any] = []
        unnamed = 0
        for projection in node.children:
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
            if name in names:
                raise QueryUnsupported(f"the name {name!r} is given twice in the SELECT list")
            names.append(name)
            expressions.append(expression)
        folds = [self.aggregate(e) for e in expressions]
        if any(f is not None for f in folds):
            if not all(f is not None for f in folds):
                raise QueryUnsupported(
                    "a SELECT list mixing aggregates and other values needs "
                    "GROUP BY, which is not served"
                )
            named_folds = list(zip(names, folds, strict=True))
            return (
                None,
                lambda rows: {
                    name: value
                    for name, fold in named_folds
                    if fold is not None and (value := fold(rows)) is not UNDEFINED
                },
                True,
            )
        compiled = list(zip(names, (self.expression(e) for e in expressions), strict=True))
        return (
            (
                lambda document: {
                    name: value
                    for name, expression in compiled
                    if (value := expression(document)) is not UNDEFINED
                }
            ),
            None,
            False,
        )

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

    # -- expressions ----------------------------------------------------------------------------

    def parameter(self, name: str) -> Any:
        if name not in self.parameters:
            raise QueryUnsupported(f"the parameter {name} is not given")
        return self.parameters[name]

    def expression(self, node: Any) -> Expression:
        if isinstance(node, Token):  # a keyword's token in an optional place: never a value
            raise QueryUnsupported(f"unexpected {node!s}")
        kind = node.data
        children = node.children
        if kind in ("number", "string", "true", "false", "null", "undefined", "parameter"):
            constant = self.constant(node)
            return lambda _document: constant
        if kind == "reference":
            name = str(children[0])
            if name != self.alias:
                raise QueryUnsupported(
                    f"the identifier {name!r} is not the FROM alias "
                    f"({self.alias or 'no FROM clause'})"
                )
            return lambda document: document
        if kind == "member":
            target, name = self.expression(children[0]), str(children[1])
            return lambda document: v.member(target(document), name)
        if kind == "index":
            target, index = self.expression(children[0]), self.expression(children[1])
            return lambda document: v.member(target(document), index(document))
        if kind == "call":
            return self.call(node)
        if kind == "unary":  # + x: x, as it is for a number (undefined otherwise)
            operand = self.expression(children[-1])
            return lambda document: value if v.is_number(value := operand(document)) else UNDEFINED
        if kind == "negative":
            operand = self.expression(children[-1])
            return lambda document: v.negative(operand(document))
        if kind == "not_":
            operand = self.expression(children[-1])
            return lambda document: v.logical_not(operand(document))
        if kind in ("and_", "or_"):
            left, right = self.expression(children[0]), self.expression(children[1])
            combine = v.logical_and if kind == "and_" else v.logical_or
            return lambda document: combine(left(document), right(document))
        if kind == "compare":
            return self.comparison(
                str(children[1]), self.expression(children[0]), self.expression(children[2])
            )
        if kind == "arithmetic":
            operator = str(children[1])
            left, right = self.expression(children[0]), self.expression(children[2])
            return lambda document: v.arithmetic(operator, left(document), right(document))
        if kind == "text_concat":
            left, right = self.expression(children[0]), self.expression(children[1])
            return lambda document: v.FUNCTIONS["CONCAT"][2](left(document), right(document))
        if kind == "in_":
            return self.membership(children)
        if kind == "between":
            return self.between(children)
        if kind == "conditional":
            test, then, otherwise = (self.expression(c) for c in children)
            return lambda document: (
                then(document) if test(document) is True else otherwise(document)
            )
        if kind == "coalesce":
            left, right = self.expression(children[0]), self.expression(children[1])
            return lambda document: (
                value if (value := left(document)) is not UNDEFINED else right(document)
            )
        if kind == "array":
            items = [self.expression(c) for c in children if c is not None]
            return lambda document: [
                value for item in items if (value := item(document)) is not UNDEFINED
            ]
        if kind == "object":
            pairs = []
            for pair in children:
                if pair is None:
                    continue
                key, value = pair.children
                text = str(key)
                pairs.append((unquote(text) if text[0] in "'\"" else text, self.expression(value)))
            return lambda document: {
                key: value for key, item in pairs if (value := item(document)) is not UNDEFINED
            }
        raise QueryUnsupported(f"{kind} is not served")

    def constant(self, node: Tree[Token]) -> Any:
        kind = node.data
        if kind == "number":
            text = str(node.children[0])
            return int(text) if text.isdigit() else float(text)
        if kind == "string":
            return unquote(str(node.children[0]))
        if kind == "parameter":
            return self.parameter(str(node.children[0]))
        return {"true": True, "false": False, "null": None, "undefined": UNDEFINED}[kind]

    def comparison(self, operator: str, left: Expression, right: Expression) -> Expression:
        if operator == "=":
            return lambda document: v.equal(left(document), right(document))
        operator = "!=" if operator == "<>" else operator
        return lambda document: v.compare(operator, left(document), right(document))

    def membership(self, children: Sequence[Any]) -> Expression:
        """`x [NOT] IN (a, b, ...)`: whether `x = a OR x = b ...` (undefined when no
        comparison is defined and none is true)."""
        target, negated = self.expression(children[0]), children[1] is not None
        candidates = [self.expression(c) for c in children[2:]]

        def test(document: Any) -> Any:
            value = target(document)
            found: Any = False
            for candidate in candidates:
                found = v.logical_or(found, v.equal(value, candidate(document)))
                if found is True:
                    break
            return v.logical_not(found) if negated else found

        return test

    def between(self, children: Sequence[Any]) -> Expression:
        target, negated = self.expression(children[0]), children[1] is not None
        low, high = self.expression(children[2]), self.expression(children[3])

        def test(document: Any) -> Any:
            value = target(document)
            found = v.logical_and(
                v.compare(">=", value, low(document)), v.compare("<=", value, high(document))
            )
            return v.logical_not(found) if negated else found

        return test

    def call(self, node: Tree[Token]) -> Expression:
        name = str(node.children[0]).upper()
        if name in v.AGGREGATES:
            raise QueryUnsupported(
                f"the aggregate {name} inside an expression is not served "
                "(only as a SELECT item or after VALUE)"
            )
        found = v.FUNCTIONS.get(name)
        if found is None:
            raise QueryUnsupported(
                f"the function {node.children[0]!s} is not served (the test kit serves "
                f"{', '.join(sorted(v.FUNCTIONS))} and the aggregates "
                f"{', '.join(sorted(v.AGGREGATES))})"
            )
        least, most, function = found
        arguments = [self.expression(a) for a in node.children[1:] if a is not None]
        if not least <= len(arguments) <= most:
            raise QueryUnsupported(
                f"{name} takes {least}" + (f" to {most}" if most > least else "") + " arguments"
            )
        return functools.partial(_apply, function, arguments)


def _apply(function: Callable[..., Any], arguments: list[Expression], document: Any) -> Any:
    return function(*(argument(document) for argument in arguments))
