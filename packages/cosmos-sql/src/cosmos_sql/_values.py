"""Cosmos DB's values in a query, as the NoSQL query language defines them (learn.microsoft.com,
"Azure Cosmos DB for NoSQL query": equality and comparison operators, logical operators, ORDER
BY, the system functions): JSON values plus **undefined** (a property that is not there, or the
result of an operation on types it does not take), which every operator propagates and a WHERE
clause treats as not true.

- `=` is defined between two values of one type (objects and arrays compared whole), undefined
  across types; `!=`, `<`, `<=`, `>`, `>=` the same, and undefined between two objects or two
  arrays;
- AND, OR, NOT on three values (true, false, undefined; anything not a boolean is undefined);
- arithmetic on numbers only (a boolean is not a number), as doubles: a division by zero is an
  infinity or NaN, a number to the other operators, and a result holding one is refused
  (`finite`: Cosmos DB answers the query 400); `||` on strings only;
- strings are counted and ordered by their UTF-16 code units;
- ORDER BY sorts across types: undefined, null, booleans (false first), numbers, strings.

Where the docs are silent, Microsoft's own code is the reference (the repository's
docs/cosmos-sql.md): funcstack's engine is held to the same answers by a property test.

Pure functions over the JSON a document holds (`dict`, `list`, `str`, `int`/`float`, `bool`,
None) and `UNDEFINED`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from operator import add, ge, gt, le, lt, mul, sub
from typing import Any, Final


class _Undefined(enum.Enum):
    """The one undefined value (never JSON: dropped from a projection, a VALUE result, an array
    or object literal); an enum's member, so a copy of it is itself."""

    UNDEFINED = "undefined"

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Final = _Undefined.UNDEFINED


class QueryUnsupported(ValueError):  # noqa: N818 - the name of 1.0's API
    """A query the engine does not serve, or one Cosmos DB refuses: the message names what (the
    part of the language, the position where the text stops being a query of the subset)."""


def is_number(value: Any) -> bool:
    return type(value) in (int, float)


#: The rank of each type in Cosmos DB's order across types (an object's: 6).
_RANKS: Final = {_Undefined: 0, type(None): 1, bool: 2, int: 3, float: 3, str: 4, list: 5}

#: The order operators, and the arithmetic ones but for a division and `%` by zero.
_ORDERS: Final = {"<": lt, "<=": le, ">": gt, ">=": ge}
_ARITHMETIC: Final = {"+": add, "-": sub, "*": mul}


def _kind(value: Any) -> int:
    """The rank of a value's type in Cosmos DB's order across types."""
    return _RANKS.get(type(value), 6)


def equal(left: Any, right: Any) -> Any:
    """`left = right`: true, false, or undefined across types."""
    kind = _kind(left)
    if kind == 0 or kind != _kind(right):
        return UNDEFINED
    return _same(left, right)


def _same(left: Any, right: Any) -> bool:
    """Deep equality of two JSON values (a boolean never equals a number)."""
    if _kind(left) != _kind(right):
        return False
    if type(left) is list:
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    if type(left) is dict:
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    return bool(left == right)


def compare(operator: str, left: Any, right: Any) -> Any:
    """`left <operator> right` for `!=`, `<`, `<=`, `>`, `>=`: undefined across types and
    between objects or arrays."""
    kind = _kind(left)
    if kind == 0 or kind != _kind(right) or kind >= 5:
        return UNDEFINED
    if operator == "!=":
        return left != right
    if kind == 1:  # null against null: equal, neither less nor greater
        return operator in ("<=", ">=")
    if kind == 4 and not (_bmp(left) and _bmp(right)):
        left, right = _utf16(left), _utf16(right)
    return bool(_ORDERS[operator](left, right))


def _bmp(text: str) -> bool:
    """Whether a string's characters are each one UTF-16 code unit (none past U+FFFF)."""
    return text.isascii() or max(text) < "\U00010000"


def _utf16(text: str) -> bytes:
    """A string as Cosmos DB orders and counts it: by its UTF-16 code units (a character past
    U+FFFF is two, which sort below U+E000)."""
    return text.encode("utf-16-be", "surrogatepass")


def truth(value: Any) -> Any:
    """A value as a logical operand: true, false, or undefined (anything not a boolean)."""
    return value if type(value) is bool else UNDEFINED


def _connective(decisive: bool) -> Callable[[Any, Any], Any]:
    """AND (`decisive` False) or OR (True) over true, false and undefined: either operand
    `decisive` decides it; both the other value, that value; else undefined."""

    def combined(left: Any, right: Any) -> Any:
        left, right = truth(left), truth(right)
        if left is decisive or right is decisive:
            return decisive
        return left if left is right and left is not UNDEFINED else UNDEFINED

    return combined


logical_and = _connective(False)
logical_or = _connective(True)


def logical_not(value: Any) -> Any:
    value = truth(value)
    return UNDEFINED if value is UNDEFINED else not value


def arithmetic(operator: str, left: Any, right: Any) -> Any:
    """`+ - * / %` on two numbers, as doubles (a division by zero is an infinity, or NaN: a
    number to the operators; a result that holds one is refused, see `finite`); undefined for
    anything else."""
    if not (is_number(left) and is_number(right)):
        return UNDEFINED
    a, b = float(left), float(right)
    if operator in _ARITHMETIC:
        return _number(_ARITHMETIC[operator](a, b))
    if operator == "/" and b == 0:
        return (
            math.nan
            if a == 0 or math.isnan(a)
            else math.copysign(math.inf, a) * math.copysign(1, b)
        )
    if operator == "/":
        return _number(a / b)
    if b == 0 or not math.isfinite(a):
        return math.nan
    return _number(math.fmod(a, b))  # the sign of the dividend, as JavaScript's %


def _number(value: float) -> Any:
    """A double as the query's number: an integer where it is one (2, not 2.0), but -0.0, an
    infinity and NaN as they are."""
    if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
        if value == 0 and math.copysign(1.0, value) < 0:
            return value
        return int(value)
    return value


def negative(value: Any) -> Any:
    return _number(-float(value)) if is_number(value) else UNDEFINED


def finite(value: Any) -> bool:
    """Whether a result can be answered: a number JSON cannot carry (an infinity or NaN, made
    by a division by zero) cannot, and Cosmos DB answers such a query 400."""
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(finite(item) for item in value)
    if type(value) is dict:
        return all(finite(item) for item in value.values())
    return True


def member(value: Any, name: Any) -> Any:
    """`value.name` / `value[name]`: a property of an object, an item of an array; else
    undefined."""
    if type(value) is dict and type(name) is str:
        return value.get(name, UNDEFINED)
    if type(value) is list and type(name) is int and 0 <= name < len(value):
        return value[name]
    return UNDEFINED


def sort_key(value: Any) -> tuple[int, Any]:
    """Where a value sorts in ORDER BY: by type (undefined, null, booleans, numbers, strings),
    then by value. An array or an object is refused: the SDK cannot merge them across
    partitions, and Cosmos DB orders them by a hash."""
    kind = _kind(value)
    if kind >= 5:
        raise QueryUnsupported("ORDER BY on an array or an object value is not served")
    return (kind, _utf16(value) if kind == 4 else value if kind >= 2 else 0)


def aggregate(name: str, values: Sequence[Any]) -> Any:
    """COUNT, SUM, AVG, MIN, MAX over the defined values of a query's rows."""
    defined = [v for v in values if v is not UNDEFINED]
    if name == "COUNT":
        return len(defined)
    if name in ("SUM", "AVG"):
        if not all(is_number(v) for v in defined):
            return UNDEFINED
        total = 0.0
        for value in defined:  # as doubles, in order
            total += value
        if name == "SUM":
            return _number(total)
        return _number(total / len(defined)) if defined else UNDEFINED
    scalars = [v for v in defined if _kind(v) < 5]
    if not scalars or len(scalars) != len(defined):
        return UNDEFINED
    return min(scalars, key=sort_key) if name == "MIN" else max(scalars, key=sort_key)


# -- the system functions ------------------------------------------------------------------------


def _text_test(test: Callable[[str, str], bool]) -> Callable[..., Any]:
    """STARTSWITH, ENDSWITH, CONTAINS: two strings and an optional ignore-case flag; else
    undefined."""

    def call(text: Any, part: Any, ignore_case: Any = False) -> Any:
        if type(text) is not str or type(part) is not str or type(ignore_case) is not bool:
            return UNDEFINED
        return test(text.lower(), part.lower()) if ignore_case else test(text, part)

    return call


def _on_text(function: Callable[[str], Any]) -> Callable[[Any], Any]:
    """LOWER, UPPER, LENGTH: a string; else undefined."""
    return lambda text: function(text) if type(text) is str else UNDEFINED


def _array_contains(array: Any, value: Any, partial: Any = False) -> Any:
    """Whether an array holds the value (an item equal to it; with `partial`, an object with
    each of its properties equal); undefined unless `array` is an array, `value` is defined
    and `partial` a boolean (undefined: false)."""
    if partial is UNDEFINED:
        partial = False
    if type(array) is not list or value is UNDEFINED or type(partial) is not bool:
        return UNDEFINED
    if partial and type(value) is dict:
        return any(
            type(item) is dict and all(k in item and _same(item[k], v) for k, v in value.items())
            for item in array
        )
    return any(_same(item, value) for item in array)


def _array_length(array: Any) -> Any:
    return len(array) if type(array) is list else UNDEFINED


def _concat(*texts: Any) -> Any:
    return "".join(texts) if texts and all(type(t) is str for t in texts) else UNDEFINED


#: The system functions served, by name: (least arguments, most arguments, the function).
FUNCTIONS: Final[dict[str, tuple[int, int, Callable[..., Any]]]] = {
    "IS_DEFINED": (1, 1, lambda v: v is not UNDEFINED),
    "IS_NULL": (1, 1, lambda v: v is None),
    "IS_BOOL": (1, 1, lambda v: type(v) is bool),
    "IS_NUMBER": (1, 1, is_number),
    "IS_STRING": (1, 1, lambda v: type(v) is str),
    "IS_ARRAY": (1, 1, lambda v: type(v) is list),
    "IS_OBJECT": (1, 1, lambda v: type(v) is dict),
    "ARRAY_CONTAINS": (2, 3, _array_contains),
    "ARRAY_LENGTH": (1, 1, _array_length),
    "STARTSWITH": (2, 3, _text_test(str.startswith)),
    "ENDSWITH": (2, 3, _text_test(str.endswith)),
    "CONTAINS": (2, 3, _text_test(str.__contains__)),
    "LOWER": (1, 1, _on_text(str.lower)),
    "UPPER": (1, 1, _on_text(str.upper)),
    "LENGTH": (1, 1, _on_text(lambda text: len(text) if _bmp(text) else len(_utf16(text)) // 2)),
    "CONCAT": (2, 64, _concat),
}
#: The aggregate functions (in a SELECT list or after VALUE, never inside an expression).
AGGREGATES: Final = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX"})
