"""The SQL filter of a Service Bus subscription rule, compiled to a function of a message's facts
(`cosmos_outbox._subscription_rules` says what Service Bus does, and where this answers
"unknown": `UnknowableError`, with why). SQL-92's three-valued logic: a missing property is
unknown (None), which never matches."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from cosmos_outbox._subscription_facts import INT64, Facts, UnknowableError, kind_of

__all__ = ["compiled"]

Node = Callable[[Facts], Any]

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<string>'(?:[^']|'')*')
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<param>@[A-Za-z_][A-Za-z0-9_]*)
  | (?P<delimited>\[(?:[^\]]|\]\])*\]|"(?:[^"]|"")*")
  | (?P<word>[^\W\d][\w]*)
  | (?P<op><>|!=|>=|<=|=|<|>|\(|\)|,|\.|\+|-|\*|/|%)
  | (?P<other>\S))""",
    re.VERBOSE,
)
_KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "IS", "NULL", "IN", "EXISTS", "TRUE", "FALSE", "LIKE", "ESCAPE"}
)
_COMPARISONS = frozenset({"=", "<>", "!=", "<", "<=", ">", ">="})


@functools.lru_cache(maxsize=256)
def compiled(expression: str, parameters: tuple[tuple[str, Any], ...] = ()) -> Node:
    """The expression as a function of a message's facts; a malformed one (or one using what
    Service Bus does not document) is a function that raises `UnknowableError`, saying why."""
    try:
        return _Parser(expression, dict(parameters)).parse()
    except UnknowableError as exc:
        why = str(exc)

        def unreadable(facts: Facts) -> Any:
            raise UnknowableError(why)

        return unreadable


def _lenient(nodes: Sequence[Node], facts: Facts) -> tuple[list[Any], str | None]:
    """Each node's value; the first reason one could not be known (None: all known)."""
    values, why = [], None
    for node in nodes:
        try:
            values.append(node(facts))
        except UnknowableError as exc:
            why = why or str(exc)
    return values, why


def _logic(nodes: Sequence[Node], decides: bool) -> Node:
    """AND (`decides` False: one false decides) or OR (True: one true decides), 3-valued."""

    def combine(facts: Facts) -> Any:
        values, why = _lenient(nodes, facts)
        for value in values:
            if value is not None and not isinstance(value, bool):
                raise UnknowableError(f"{value!r} is not a condition")
        if decides in values:
            return decides
        if why is not None:
            raise UnknowableError(why)
        return None if None in values else not decides

    return combine


class _Parser:
    def __init__(self, text: str, parameters: dict[str, Any]) -> None:
        self.text = text
        self.parameters = {k.lower().lstrip("@"): v for k, v in parameters.items()}
        self.tokens: list[tuple[str, str]] = []
        for match in _TOKEN.finditer(text.rstrip().rstrip(";")):
            kind = str(match.lastgroup)
            value = match.group(kind)
            if kind == "other":
                raise UnknowableError(f"{value!r} in {text!r} is not SQL filter syntax")
            if kind == "word" and value.upper() in _KEYWORDS:
                kind, value = "keyword", value.upper()
            self.tokens.append((kind, value))
        if not self.tokens:
            raise UnknowableError("an empty SQL filter")
        self.pos = 0

    def _peek(self, ahead: int = 0) -> tuple[str, str]:
        at = self.pos + ahead
        return self.tokens[at] if at < len(self.tokens) else ("end", "")

    def _take(self, value: str | None = None) -> tuple[str, str]:
        token = self._peek()
        if value is not None and token[1] != value:
            raise UnknowableError(f"{self.text!r}: expected {value}, found {token[1] or 'the end'}")
        self.pos += 1
        return token

    def _at(self, value: str) -> bool:
        if self._peek()[1] == value and self._peek()[0] in ("keyword", "op"):
            self.pos += 1
            return True
        return False

    def parse(self) -> Node:
        node = self._or()
        if self.pos != len(self.tokens):
            raise UnknowableError(f"{self.text!r}: unexpected {self._peek()[1]!r}")
        return node

    def _or(self) -> Node:
        nodes = [self._and()]
        while self._at("OR"):
            nodes.append(self._and())
        return nodes[0] if len(nodes) == 1 else _logic(nodes, True)

    def _and(self) -> Node:
        nodes = [self._not()]
        while self._at("AND"):
            nodes.append(self._not())
        return nodes[0] if len(nodes) == 1 else _logic(nodes, False)

    def _not(self) -> Node:
        if self._at("NOT"):
            return _negated(self._not())
        return self._predicate()

    def _predicate(self) -> Node:
        if self._at("EXISTS"):
            self._take("(")
            exists = self._property(lookup=False)
            self._take(")")
            return exists
        left = self._additive()
        if self._peek()[1] in _COMPARISONS and self._peek()[0] == "op":
            op = self._take()[1]
            return _binary(_compare, op, left, self._additive())
        if self._at("IS"):
            negate = self._at("NOT")
            self._take("NULL")
            return lambda facts: (left(facts) is None) != negate
        negate = self._at("NOT")
        if self._at("IN"):
            return _member(left, self._list(), negate)
        if self._at("LIKE"):
            pattern = self._additive()
            escape = self._additive() if self._at("ESCAPE") else None
            return _like(left, pattern, escape, negate)
        if negate:
            raise UnknowableError(f"{self.text!r}: NOT must be followed by IN or LIKE here")
        return left

    def _list(self) -> list[Node]:
        self._take("(")
        options = [self._additive()]
        while self._at(","):
            options.append(self._additive())
        self._take(")")
        return options

    def _additive(self) -> Node:
        node = self._multiplicative()
        while self._peek() in (("op", "+"), ("op", "-")):
            node = _binary(_arithmetic, self._take()[1], node, self._multiplicative())
        return node

    def _multiplicative(self) -> Node:
        node = self._unary()
        while self._peek() in (("op", "*"), ("op", "/"), ("op", "%")):
            node = _binary(_arithmetic, self._take()[1], node, self._unary())
        return node

    def _unary(self) -> Node:
        if self._peek() in (("op", "+"), ("op", "-")):
            sign = self._take()[1]
            inner = self._unary()
            return lambda facts: _arithmetic("-" if sign == "-" else "+", 0, inner(facts), True)
        return self._primary()

    def _primary(self) -> Node:
        kind, value = self._peek()
        if (kind, value) == ("op", "("):
            self._take()
            inner = self._or()
            self._take(")")
            return inner
        if kind in ("string", "number", "param") or value in ("TRUE", "FALSE", "NULL"):
            self._take()
            constant = self._constant(kind, value)
            return lambda facts: constant
        if kind == "word" and self._peek(1) == ("op", "("):
            return self._function()
        if kind in ("word", "delimited"):
            return self._property(lookup=True)
        raise UnknowableError(f"{self.text!r}: expected a value, found {value or 'the end'!r}")

    def _constant(self, kind: str, value: str) -> Any:
        if kind == "string":
            return value[1:-1].replace("''", "'")
        if kind == "param":
            if value[1:].lower() not in self.parameters:
                raise UnknowableError(f"{self.text!r}: parameter {value} has no value")
            return self.parameters[value[1:].lower()]
        if kind == "number":
            if re.fullmatch(r"\d+", value):
                number = int(value)
                if number > INT64[1]:
                    raise UnknowableError(f"{value} is beyond an Int64")
                return number
            return float(value)
        return {"TRUE": True, "FALSE": False, "NULL": None}[value]

    def _function(self) -> Node:
        name = self._take()[1].lower()
        self._take("(")
        if name == "newid":
            self._take(")")
            raise UnknowableError("newid() gives a new GUID at each evaluation")
        if name not in ("property", "p"):
            raise UnknowableError(f"{self.text!r}: no function {name}()")
        argument = self._additive()
        self._take(")")

        def named(facts: Facts) -> Any:
            key = argument(facts)
            if not isinstance(key, str):
                raise UnknowableError(f"property({key!r}) names no property")
            return facts.user_value(key)[1]

        return named

    def _property(self, *, lookup: bool) -> Node:
        kind, first = self._take()
        if kind not in ("word", "delimited"):
            found = first or "the end"
            raise UnknowableError(f"{self.text!r}: expected a property, found {found!r}")
        scope, name = "user", _unquoted(first)
        if kind == "word" and first.lower() in ("sys", "user") and self._at("."):
            scope, name = first.lower(), _unquoted(self._take()[1])
        if scope == "sys":
            if lookup:
                return lambda facts: facts.system_value(name)
            return lambda facts: facts.system_value(name) is not None
        if lookup:
            return lambda facts: facts.user_value(name)[1]
        return lambda facts: facts.user_value(name)[0]


def _unquoted(token: str) -> str:
    if token.startswith("["):
        return token[1:-1].replace("]]", "]")
    if token.startswith('"'):
        return token[1:-1].replace('""', '"')
    return token


def _negated(inner: Node) -> Node:
    def negated(facts: Facts) -> Any:
        value = inner(facts)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise UnknowableError(f"NOT of {value!r}, which is not a condition")
        return not value

    return negated


def _binary(operate: Callable[[str, Any, Any], Any], op: str, left: Node, right: Node) -> Node:
    return lambda facts: operate(op, left(facts), right(facts))


def _compare(op: str, a: Any, b: Any) -> Any:
    """A comparison as C# binds it; unknown (None) with a missing value (see the module)."""
    if a is None or b is None:
        return None
    kind = kind_of(a)
    if kind != kind_of(b) or kind not in ("boolean", "number", "text", "time", "duration"):
        raise UnknowableError(f"{a!r} {op} {b!r} compares a {kind_of(a)} with a {kind_of(b)}")
    if kind == "time" and (a.tzinfo is None) != (b.tzinfo is None):
        raise UnknowableError(f"{a!r} {op} {b!r}: one time has a zone, the other none")
    if op in ("=", "<>", "!="):
        return (a == b) == (op == "=")
    if kind in ("boolean", "text"):
        # Service Bus's documentation does not say how (or whether) it orders these: unknown,
        # said as such (a guess at .NET's ordering would be a reason no one could check)
        raise UnknowableError(f"{a!r} {op} {b!r}: how Service Bus orders {kind}s is not documented")
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _arithmetic(op: str, a: Any, b: Any, unary: bool = False) -> Any:
    """`a op b` as C# computes it (`unary`: `op b`); unknown with a missing value."""
    if b is None or (a is None and not unary):
        return None
    ka, kb = ("number" if unary else kind_of(a)), kind_of(b)
    if unary and kb == "duration" and op == "-":
        return -b
    if ka == kb == "number":
        return _numbers(op, a, b)
    if op == "+" and ka == kb == "text":
        return a + b
    if ka in ("time", "duration") and kb in ("time", "duration") and op in ("+", "-"):
        try:
            return a + b if op == "+" else a - b
        except TypeError:
            pass
    raise UnknowableError(f"{a!r} {op} {b!r}: no such arithmetic between a {ka} and a {kb}")


def _numbers(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, bool) or isinstance(b, bool):
        raise UnknowableError(f"{a!r} {op} {b!r}: arithmetic on a boolean")
    if isinstance(a, int) and isinstance(b, int):
        if op in ("/", "%") and b == 0:
            raise UnknowableError(f"{a} {op} 0 divides by zero")
        if op == "/" or op == "%":
            quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            result = quotient if op == "/" else a - b * quotient
        else:
            result = {"+": a + b, "-": a - b, "*": a * b}[op]
        if not INT64[0] <= result <= INT64[1]:
            raise UnknowableError(f"{a} {op} {b} overflows an Int64")
        return result
    x, y = float(a), float(b)
    if op in ("/", "%") and y == 0:
        raise UnknowableError(f"{a} {op} 0 divides by zero")
    if op == "%":
        return math.fmod(x, y)
    return {"+": x + y, "-": x - y, "*": x * y, "/": x / y}[op]


def _member(left: Node, options: list[Node], negate: bool) -> Node:
    def member(facts: Facts) -> Any:
        value = left(facts)
        if value is None:
            return None
        found, unsure = False, None
        for option in options:
            try:
                equal = _compare("=", value, option(facts))
            except UnknowableError as exc:
                unsure = unsure or str(exc)
                continue
            found = found or equal is True
            if equal is None:
                unsure = unsure or "IN with a NULL in its list"
        if found:
            return not negate
        if unsure is not None:
            raise UnknowableError(unsure)
        return negate

    return member


def _like(value: Node, pattern: Node, escape: Node | None, negate: bool) -> Node:
    def like(facts: Facts) -> Any:
        text, shape = value(facts), pattern(facts)
        esc = escape(facts) if escape is not None else None
        if text is None or shape is None or (escape is not None and esc is None):
            return None
        if not isinstance(text, str) or not isinstance(shape, str):
            raise UnknowableError(f"{text!r} LIKE {shape!r}: LIKE compares texts")
        if esc is not None and (not isinstance(esc, str) or len(esc) != 1):
            raise UnknowableError(f"ESCAPE {esc!r} is not one character")
        return (_like_regex(shape, esc).fullmatch(text) is not None) != negate

    return like


@functools.lru_cache(maxsize=256)
def _like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    out, chars = [], iter(pattern)
    for char in chars:
        if char == escape:
            literal = next(chars, None)
            if literal is None:
                raise UnknowableError(f"LIKE {pattern!r} ends with its escape character")
            out.append(re.escape(literal))
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.DOTALL)
