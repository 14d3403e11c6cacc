"""Subscription rules: which messages sent to a topic a subscription receives.

The ``Rules`` of a subscription in the official emulator's Config.json::

    {"Name": "r1", "Properties": {"FilterType": "Correlation",
        "CorrelationFilter": {"Label": "...", "Properties": {"kind": "a"}}}}
    {"Name": "r2", "Properties": {"FilterType": "Sql",
        "SqlFilter": {"SqlExpression": "kind = 'a' AND EXISTS(tenant)"}}}

A message goes to a subscription when ANY of its rules matches; a subscription without rules
receives everything (the service's default ``$Default`` rule, a TrueFilter).

* Correlation: every field given must equal the message's (``ContentType``, ``CorrelationId``,
  ``Label`` = subject, ``MessageId``, ``ReplyTo``, ``ReplyToSessionId``, ``SessionId``, ``To``),
  and every entry of ``Properties`` an application property of that name and value. Strings
  compare exactly (case-sensitive).
* Sql, a subset, checked at load: ``NOT``/``AND``/``OR``, parentheses, the comparisons ``=``,
  ``<>``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``IS [NOT] NULL``, ``[NOT] IN (...)``,
  ``EXISTS(p)``; properties ``name``, ``user.name``, ``[odd-name]`` and ``sys.<system
  property>`` (the names above, ``Subject`` too); constants: 'strings' ('' for a quote),
  numbers, TRUE, FALSE, NULL; an application property's name in any case (names are
  case-insensitive). Three-valued logic: a missing property makes a comparison
  unknown, which does not match; values of different types are not equal. Not supported (the
  config is refused with the reason): arithmetic, LIKE, functions.
* A rule's ``Action`` (``SET sys.To = 'x'``, ``REMOVE p``) is accepted, so that an emulator
  Config.json loads unchanged, and not applied: a warning in the endpoint's log says so.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from funcstack.servicebus._amqp import decode_value, fields

logger = logging.getLogger(__name__)


class RuleError(ValueError):
    """A rule the local endpoint cannot take (malformed, or a feature it does not have)."""


#: Correlation filter field -> index in the AMQP properties section.
SYSTEM_FIELDS = {
    "messageid": 0,
    "to": 2,
    "label": 3,
    "subject": 3,
    "replyto": 4,
    "correlationid": 5,
    "contenttype": 6,
    "sessionid": 10,
    "replytosessionid": 12,
}
CORRELATION_FIELDS = (
    "ContentType",
    "CorrelationId",
    "Label",
    "MessageId",
    "ReplyTo",
    "ReplyToSessionId",
    "SessionId",
    "To",
)


def _plain(value: Any) -> Any:
    """A property's value as filters compare it: text as ``str`` (a symbol or a char too, which
    the codec types as subclasses of it), numbers and the rest as they are."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        return str(value)
    return value


@dataclass(frozen=True)
class Facts:
    """What filters look at: the system properties (by lower-case name) and the application
    properties of one message, strings decoded."""

    system: Mapping[str, Any]
    user: Mapping[str, Any]

    def named(self, name: str) -> tuple[bool, Any]:
        """(present, value) of application property `name` as a SQL filter names it: its case
        aside (the SQL filter syntax: "Property names are case-insensitive")."""
        if name in self.user:
            return True, self.user[name]
        folded = name.lower()
        for key, value in self.user.items():
            if key.lower() == folded:
                return True, value
        return False, None

    @classmethod
    def of(cls, properties_raw: bytes, app_properties: Mapping[Any, Any] | None) -> Facts:
        section = fields(decode_value(properties_raw)[0] if properties_raw else None, 13)
        system = {
            name: None if section[i] is None else str(_plain(section[i]))
            for name, i in SYSTEM_FIELDS.items()
        }
        user = {str(_plain(k)): _plain(v) for k, v in (app_properties or {}).items()}
        return cls(system=system, user=user)


class Filter(Protocol):
    def matches(self, facts: Facts) -> bool: ...


def _equal(a: Any, b: Any) -> bool | None:
    """SQL equality: unknown with a NULL, false across types (a bool is not a number)."""
    if a is None or b is None:
        return None
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class CorrelationFilter:
    system: tuple[tuple[str, str], ...]
    properties: tuple[tuple[str, Any], ...]

    def matches(self, facts: Facts) -> bool:
        return all(facts.system.get(name) == value for name, value in self.system) and all(
            _equal(facts.user.get(name), value) is True for name, value in self.properties
        )


@dataclass(frozen=True)
class SqlFilter:
    expression: str
    evaluate: Callable[[Facts], Any]

    def matches(self, facts: Facts) -> bool:
        return self.evaluate(facts) is True


@dataclass(frozen=True)
class Rule:
    name: str
    filter: Filter


def accepts(rules: Sequence[Rule], facts: Facts) -> bool:
    return not rules or any(rule.filter.matches(facts) for rule in rules)


def parse_rules(raw: Any, where: str) -> list[Rule]:
    """The ``Rules`` list of a subscription; ``where`` names it in errors."""
    rules = []
    for entry in raw or []:
        name = str(entry.get("Name", ""))
        rule_where = f"{where}, rule {name!r}"
        props = entry.get("Properties") or {}
        action = str((props.get("Action") or {}).get("SqlExpression") or "").strip()
        if action:
            if not _ACTION.match(action):
                raise RuleError(
                    f"{rule_where}: rule action {action!r} is not a SET or REMOVE statement"
                )
            # Taken, so an emulator Config.json loads as it is; not applied (documented limit).
            logger.warning(
                "%s: rule action %r is not applied by the local endpoint (the filter is)",
                rule_where,
                action,
            )
        kind = str(props.get("FilterType", ""))
        if kind == "Correlation":
            rules.append(Rule(name, _correlation(props.get("CorrelationFilter") or {}, rule_where)))
        elif kind == "Sql":
            expression = str((props.get("SqlFilter") or {}).get("SqlExpression", ""))
            rules.append(Rule(name, SqlFilter(expression, _Parser(expression, rule_where).parse())))
        else:
            raise RuleError(f"{rule_where}: FilterType must be Correlation or Sql, not {kind!r}")
    return rules


def _correlation(raw: Mapping[str, Any], where: str) -> CorrelationFilter:
    unknown = set(raw) - {*CORRELATION_FIELDS, "Properties"}
    if unknown:
        raise RuleError(f"{where}: unknown CorrelationFilter field(s) {sorted(unknown)}")
    system = tuple(
        (name.lower(), str(raw[name]))
        for name in CORRELATION_FIELDS
        if raw.get(name) not in (None, "")
    )
    properties = tuple((str(k), v) for k, v in (raw.get("Properties") or {}).items())
    if not system and not properties:
        raise RuleError(f"{where}: a CorrelationFilter needs at least one field")
    return CorrelationFilter(system, properties)


#: What a rule action looks like (SET/REMOVE statements); it is accepted, not applied.
_ACTION = re.compile(r"^\s*(SET|REMOVE)\s", re.IGNORECASE)


# -- the SQL subset ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<string>'(?:[^']|'')*')
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<name>\[[^\]]+\]|[A-Za-z_][A-Za-z0-9_]*(?:\.(?:\[[^\]]+\]|[A-Za-z_][A-Za-z0-9_]*))?)
  | (?P<op><>|!=|>=|<=|=|<|>|\(|\)|,)
  | (?P<other>\S))""",
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "IN", "EXISTS", "TRUE", "FALSE", "LIKE", "ESCAPE"}
Evaluator = Callable[[Facts], Any]


class _Parser:
    def __init__(self, text: str, where: str) -> None:
        self.where = where
        self.tokens: list[tuple[str, str]] = []
        for match in _TOKEN.finditer(text.rstrip()):
            kind = str(match.lastgroup)
            value = match.group(kind)
            if kind == "other":
                raise self._error(f"{value!r} (arithmetic and other operators are not supported)")
            if kind == "name" and value.upper() in _KEYWORDS:
                kind, value = "keyword", value.upper()
            self.tokens.append((kind, value))
        if not self.tokens:
            raise RuleError(f"{where}: empty SqlExpression")
        self.pos = 0

    def _error(self, what: str) -> RuleError:
        return RuleError(f"{self.where}: SqlExpression not supported locally: {what}")

    def _peek(self) -> tuple[str, str]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("end", "")

    def _take(self, value: str | None = None) -> tuple[str, str]:
        token = self._peek()
        if value is not None and token[1] != value:
            raise self._error(f"expected {value!r}, found {token[1] or 'the end'!r}")
        self.pos += 1
        return token

    def parse(self) -> Evaluator:
        tree = self._or()
        if self.pos != len(self.tokens):
            raise self._error(f"unexpected {self._peek()[1]!r}")
        return tree

    def _or(self) -> Evaluator:
        terms = [self._and()]
        while self._peek() == ("keyword", "OR"):
            self._take()
            terms.append(self._and())
        if len(terms) == 1:
            return terms[0]

        def either(facts: Facts) -> Any:
            values = [t(facts) for t in terms]
            return True if True in values else None if None in values else False

        return either

    def _and(self) -> Evaluator:
        terms = [self._not()]
        while self._peek() == ("keyword", "AND"):
            self._take()
            terms.append(self._not())
        if len(terms) == 1:
            return terms[0]

        def both(facts: Facts) -> Any:
            values = [t(facts) for t in terms]
            return False if False in values else None if None in values else True

        return both

    def _not(self) -> Evaluator:
        if self._peek() == ("keyword", "NOT"):
            self._take()
            inner = self._not()
            return lambda facts: None if (v := inner(facts)) is None else not v
        return self._predicate()

    def _predicate(self) -> Evaluator:
        if self._peek() == ("op", "("):
            self._take()
            inner = self._or()
            self._take(")")
            return inner
        if self._peek() == ("keyword", "EXISTS"):
            self._take()
            self._take("(")
            kind, name = self._take()
            if kind != "name":
                raise self._error("EXISTS takes a property name")
            scope, prop = self._scoped(name)
            self._take(")")
            if scope == "sys":
                return lambda facts: facts.system.get(prop) is not None
            return lambda facts: facts.named(prop)[0]
        left = self._operand()
        kind, word = self._peek()
        negate = False
        if (kind, word) == ("keyword", "IS"):
            self._take()
            if self._peek() == ("keyword", "NOT"):
                self._take()
                negate = True
            self._take("NULL")
            return lambda facts: (left(facts) is None) != negate
        if (kind, word) == ("keyword", "NOT"):
            self._take()
            negate = True
            kind, word = self._peek()
        if (kind, word) == ("keyword", "IN"):
            self._take()
            self._take("(")
            options = [self._operand()]
            while self._peek() == ("op", ","):
                self._take()
                options.append(self._operand())
            self._take(")")

            def member(facts: Facts) -> Any:
                value = left(facts)
                if value is None:
                    return None
                found = any(_equal(value, o(facts)) is True for o in options)
                return found != negate

            return member
        if word == "LIKE":
            raise self._error("LIKE")
        if negate or kind != "op" or word in {"(", ")", ","}:
            raise self._error(f"expected a comparison, found {word or 'the end'!r}")
        self._take()
        right = self._operand()
        return _comparison(word, left, right)

    def _operand(self) -> Evaluator:
        kind, value = self._take()
        if kind == "string":
            text = value[1:-1].replace("''", "'")
            return lambda facts: text
        if kind == "number":
            number = float(value) if any(c in value for c in ".eE") else int(value)
            return lambda facts: number
        if kind == "keyword" and value in {"TRUE", "FALSE", "NULL"}:
            constant = {"TRUE": True, "FALSE": False, "NULL": None}[value]
            return lambda facts: constant
        if kind == "name":
            if self._peek() == ("op", "("):
                raise self._error(f"function {value}()")
            scope, prop = self._scoped(value)
            if scope == "sys":
                return lambda facts: facts.system.get(prop)
            return lambda facts: facts.named(prop)[1]
        raise self._error(f"expected a property or a constant, found {value or 'the end'!r}")

    def _scoped(self, name: str) -> tuple[str, str]:
        scope, prop = name.split(".", 1) if "." in name and not name.startswith("[") else ("", name)
        prop = prop[1:-1] if prop.startswith("[") else prop
        scope = scope.lower() or "user"
        if scope not in {"sys", "user"}:
            raise self._error(f"scope {scope!r} (sys or user)")
        if scope == "sys":
            if prop.lower() not in SYSTEM_FIELDS:
                raise self._error(f"system property sys.{prop}")
            return scope, prop.lower()
        return scope, prop


def _comparison(op: str, left: Evaluator, right: Evaluator) -> Evaluator:
    def compare(facts: Facts) -> Any:
        a, b = left(facts), right(facts)
        if op in {"=", "<>", "!="}:
            same = _equal(a, b)
            return same if same is None or op == "=" else not same
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
        if not numbers and not (isinstance(a, str) and isinstance(b, str)):
            return None
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]

    return compare
