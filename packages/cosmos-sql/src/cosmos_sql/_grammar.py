"""The subset of Cosmos DB's NoSQL query language cosmos-sql serves, as a grammar
(lark, LALR), and its parser: what is outside it is refused, named (`QueryUnsupported`), never
answered another way.

Served: `SELECT [TOP n] * | VALUE <expr> | <expr> [AS name], ...`, `FROM <container> [[AS]
alias]` (or none: evaluated once), `WHERE`, `ORDER BY <property> [ASC|DESC], ...`, `OFFSET m
LIMIT n`; expressions: literals
(strings in single or double quotes, numbers, true, false, null, undefined, arrays, objects),
parameters (`@name`), properties (`c.a.b`, `c["a"]`, `c.items[0]`), `= != <> < <= > >=`,
`AND OR NOT`, `[NOT] IN (...)`, `[NOT] BETWEEN a AND b`, `+ - * / %`, `||`, `? :`, `??`,
system functions (`_values.FUNCTIONS`) and the aggregates `COUNT SUM AVG MIN MAX`.

Precedence, from the tightest: `.` and `[]`; unary `-`, `+` and NOT (`NOT c.a = 1` is `(NOT
c.a) = 1`); `* / %`; `+ -`; `||`; `< <= > >=`; `= != <>`; IN and BETWEEN; AND; OR; `??`;
`? :`. As the service parses them (the .NET SDK's grammar of it, sql.g4, and funcstack's engine
agree), but for `||`, which that grammar puts below the comparisons and this one, as funcstack's,
above (docs/cosmos-sql.md).

Refused: JOIN, GROUP BY, DISTINCT, subqueries and EXISTS, LIKE, `FROM x IN ...`, user-defined
functions (`udf.`), any function not in `_values.FUNCTIONS`, and ORDER BY of anything but a
property of the document (Cosmos DB refuses it too).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Final

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from cosmos_sql._values import QueryUnsupported

GRAMMAR: Final = r"""
start: _SELECT [top] selection [from_clause] [where_clause] [order_clause] [offset_limit]

top: _TOP count
?count: INT -> integer
      | PARAM -> parameter
selection: "*"                                -> select_all
         | _VALUE expr                        -> select_value
         | projection ("," projection)*       -> select_list
projection: expr [_AS? NAME]
from_clause: _FROM NAME [_AS? NAME]
where_clause: _WHERE expr
order_clause: _ORDER _BY sort ("," sort)*
sort: expr [DIRECTION]
offset_limit: _OFFSET count _LIMIT count

?expr: coalesce
     | coalesce "?" expr ":" expr             -> conditional
?coalesce: or_expr
     | coalesce "??" or_expr                  -> coalesce
?or_expr: and_expr
     | or_expr _OR and_expr                   -> or_
?and_expr: predicate
     | and_expr _AND predicate                -> and_
?predicate: comparison
     | comparison [NOT] _IN "(" expr ("," expr)* ")"     -> in_
     | comparison [NOT] _BETWEEN concat _AND concat      -> between
?comparison: relation
     | comparison EQUALITY relation           -> compare
?relation: concat
     | relation RELATION concat               -> compare
?concat: additive
     | concat "||" additive                   -> text_concat
?additive: multiplicative
     | additive PLUS multiplicative           -> arithmetic
     | additive MINUS multiplicative          -> arithmetic
?multiplicative: unary
     | multiplicative STAR unary              -> arithmetic
     | multiplicative SLASH unary             -> arithmetic
     | multiplicative PERCENT unary           -> arithmetic
?unary: postfix
     | MINUS unary                            -> negative
     | PLUS unary
     | NOT unary                              -> not_
?postfix: primary
     | postfix "." NAME                       -> member
     | postfix "[" expr "]"                   -> index
?primary: NUMBER                              -> number
     | STRING                                 -> string
     | _TRUE                                  -> true
     | _FALSE                                 -> false
     | _NULL                                  -> null
     | _UNDEFINED                             -> undefined
     | PARAM                                  -> parameter
     | NAME                                   -> reference
     | NAME "(" [expr ("," expr)*] ")"        -> call
     | "(" expr ")"
     | "[" [expr ("," expr)*] "]"             -> array
     | "{" [pair ("," pair)*] "}"             -> object
pair: (STRING | NAME) ":" expr

_SELECT.2: /select\b/i
_TOP.2: /top\b/i
_VALUE.2: /value\b/i
_AS.2: /as\b/i
_FROM.2: /from\b/i
_WHERE.2: /where\b/i
_ORDER.2: /order\b/i
_BY.2: /by\b/i
_OFFSET.2: /offset\b/i
_LIMIT.2: /limit\b/i
_AND.2: /and\b/i
_OR.2: /or\b/i
NOT.2: /not\b/i
_IN.2: /in\b/i
_BETWEEN.2: /between\b/i
_TRUE.2: /true\b/i
_FALSE.2: /false\b/i
_NULL.2: /null\b/i
_UNDEFINED.2: /undefined\b/i
DIRECTION.2: /(asc|desc)\b/i
EQUALITY: "=" | "!=" | "<>"
RELATION: /<=|>=|<(?!>)|>/
PLUS: "+"
MINUS: "-"
STAR: "*"
SLASH: "/"
PERCENT: "%"
PARAM: /@[A-Za-z_][A-Za-z0-9_]*/
NAME: /[A-Za-z_$][A-Za-z0-9_$]*/
INT: /\d+/
NUMBER: /\d+(\.\d+)?([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?/
STRING: /'(?:[^'\\]|\\.)*'/ | /"(?:[^"\\]|\\.)*"/
COMMENT: /--[^\n]*/
%import common.WS
%ignore WS
%ignore COMMENT
"""

_PARSER: Final = Lark(GRAMMAR, parser="lalr", maybe_placeholders=True)
#: What the grammar leaves out on purpose, found in the text outside its string literals (not
#: as a property name: `c.join` is a property): refused by name.
_REFUSED: Final = re.compile(
    r"(?<![\w$.@])(join|group\s+by|distinct|exists|like|having|udf\s*\.)(?![\w$])", re.IGNORECASE
)
_FROM_IN: Final = re.compile(r"(?<![\w$.@])from\s+[A-Za-z_$][\w$]*\s+in(?![\w$])", re.IGNORECASE)
_LITERALS: Final = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
#: In a literal's text: an escape (kept for JSON's reader, but `\'`), or a double quote (escaped).
_QUOTED: Final = re.compile(r"\\(.)|\"", re.DOTALL)


def _outside_literals(sql: str) -> str:
    return _LITERALS.sub(lambda m: " " * len(m.group()), sql)


@functools.lru_cache(maxsize=512)
def parse(sql: str) -> Tree[Token]:
    """The syntax tree of a query. QueryUnsupported names what is refused or where the text
    stops being a query of the subset."""
    bare = _outside_literals(sql)
    refused = _REFUSED.search(bare)
    if refused is not None:
        raise QueryUnsupported(f"{' '.join(refused.group(1).upper().split())} is not served")
    if _FROM_IN.search(bare) is not None:
        raise QueryUnsupported("FROM <alias> IN <array> (iteration) is not served")
    if len(re.findall(r"(?<![\w$.@])select(?![\w$])", bare, re.IGNORECASE)) > 1:
        raise QueryUnsupported("a subquery is not served")
    try:
        return _PARSER.parse(sql)
    except UnexpectedInput as error:
        found = getattr(error, "token", None) or sql[error.pos_in_stream :][:20]
        raise QueryUnsupported(
            f"unexpected {str(found)!r} at line {error.line}, column {error.column}: not a "
            "query of the subset served"
        ) from None


def unquote(literal: str) -> str:
    """A string literal's text (single or double quotes; escapes as JSON's, and `\\'`), read by
    JSON's own reader: a surrogate pair written as two `\\u` escapes is one character."""
    as_json = _QUOTED.sub(
        lambda m: "'" if m.group() == "\\'" else m.group() if m[1] else '\\"', literal[1:-1]
    )
    try:
        text: str = json.loads(f'"{as_json}"', strict=False)
    except json.JSONDecodeError as error:
        raise QueryUnsupported(
            f"{literal} is not a string as JSON writes one: {error.msg}"
        ) from None
    return text
