"""What a text field may hold, decided by Unicode's own data.

Every character is one of:

* **refused** wherever it stands: control (Cc), format (Cf), surrogate (Cs), private use (Co),
  unassigned (Cn, which includes the noncharacters U+FDD0-FDEF and U+xFFFE/xFFFF), line and
  paragraph separators (Zl, Zp); default-ignorable code points (Default_Ignorable_Code_Point:
  the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the grapheme joiner, ...) except the
  variation selectors (Variation_Selector: emoji presentation, ideographic variants, Mongolian
  free variation selectors); and the placeholders U+FFFC and U+FFFD (a replacement character
  means the text was damaged by a decoder before it reached us);
* **allowed in context** only: ZERO WIDTH JOINER U+200D and ZERO WIDTH NON-JOINER U+200C
  after a virama (canonical combining class 9), as RFC 5892 Appendix A (IDNA's CONTEXTJ) and
  UAX #31 allow them in conjuncts; ZWNJ inside a word of a cursive script: between two
  joining letters (Joining_Type L, D or R), transparent characters (marks) aside -- wider than
  RFC 5892 A.1, which wants a left- or dual-joining letter before it, because Persian writes
  ZWNJ as the half-space between the parts of a word after any letter ("مهر\u200cآذر", after
  REH, which is right-joining); ZWJ inside an emoji ZWJ sequence (UTS #51: between two
  Extended_Pictographic characters, the first possibly followed by U+FE0F or an
  Emoji_Modifier); the tag characters U+E0020-E007F only in an emoji tag sequence (U+1F3F4,
  tags U+E0020-E007E, U+E007F: the flags of England, Scotland, Wales);
* otherwise **space** (what `str.strip` trims), **combining mark** (M*), **blank graphic**
  (U+2800 BRAILLE PATTERN BLANK: no Unicode property marks a graphic character that renders
  as nothing, so this is the one hand-named exception) or **visible** (the rest: letters,
  digits, punctuation, symbols).

A value is trimmed; it must not start with a combining mark (it has no base to sit on); a
required value must hold a visible character, and an optional one either nothing or a visible
character (a value of spaces, marks and blank graphics only looks empty).

Python's `unicodedata` (Unicode 15.1 on Python 3.13) decides categories, combining classes and
what is assigned; joining types, Extended_Pictographic, Emoji_Modifier, Default_Ignorable and
Variation_Selector come from the `regex` module's Unicode data, through the generated
`cosmos_outbox.text._unicode_tables` (packages/cosmos-outbox/scripts/generate_unicode_tables.py;
a test regenerates it). The check below and the OpenAPI `pattern` are built from the same
tables, and a property test holds them to the same verdicts.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable
from enum import StrEnum
from functools import cache

from cosmos_outbox.text import _unicode_tables as tables

ZWNJ = "\u200c"
ZWJ = "\u200d"
EMOJI_PRESENTATION = "\ufe0f"
BLACK_FLAG = "\U0001f3f4"
TAG_SPEC = (0xE0020, 0xE007E)
CANCEL_TAG = "\U000e007f"

#: General categories refused wherever they stand.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: U+FFFC OBJECT REPLACEMENT and U+FFFD REPLACEMENT CHARACTER stand for something that is not
#: there (an object, bytes a decoder could not read): refused.
PLACEHOLDERS = frozenset({0xFFFC, 0xFFFD})
#: Graphic characters that render as nothing; no Unicode property says so.
BLANK_GRAPHICS = frozenset({0x2800})


class CharClass(StrEnum):
    REFUSED = "refused"
    SPACE = "space"
    MARK = "mark"
    BLANK = "blank"
    VISIBLE = "visible"


def classify(cp: int, *, default_ignorable: bool, variation_selector: bool) -> CharClass:
    """The class of one code point outside the contexts (ZWJ, ZWNJ and tags are REFUSED
    here). Used by the generator of the tables module, which records the result."""
    ch = chr(cp)
    category = unicodedata.category(ch)
    if (
        category in REFUSED_CATEGORIES
        or cp in PLACEHOLDERS
        or (default_ignorable and not variation_selector)
    ):
        return CharClass.REFUSED
    if ch.isspace():
        return CharClass.SPACE
    if category.startswith("M"):
        return CharClass.MARK
    if cp in BLANK_GRAPHICS:
        return CharClass.BLANK
    return CharClass.VISIBLE


class CodePoints:
    """A set of code points held as sorted, disjoint, inclusive ranges."""

    def __init__(self, ranges: Iterable[tuple[int, int]]) -> None:
        self.ranges = tuple(ranges)
        self._starts = [lo for lo, _ in self.ranges]

    @classmethod
    def parse(cls, table: str) -> CodePoints:
        """From a table of the tables module: "0600-0605 061C ..." (hexadecimal)."""
        ranges = []
        for token in table.split():
            lo, _, hi = token.partition("-")
            ranges.append((int(lo, 16), int(hi or lo, 16)))
        return cls(ranges)

    def __contains__(self, ch: object) -> bool:
        if not isinstance(ch, str) or len(ch) != 1:
            return False
        cp = ord(ch)
        i = bisect_right(self._starts, cp) - 1
        return i >= 0 and cp <= self.ranges[i][1]

    def __or__(self, other: CodePoints) -> CodePoints:
        return CodePoints(_merge(self.ranges + other.ranges))

    def regex_class(self) -> str:
        """The inside of a `[...]` class: the characters themselves, escaped where a class
        reads them as syntax, so the pattern means the same to Python, Rust and ECMA-262 `u`."""
        return "".join(
            _char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in self.ranges
        )


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _char(cp: int) -> str:
    if chr(cp) in "\\]^-[":
        return "\\" + chr(cp)
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    return chr(cp)


SPACE = CodePoints.parse(tables.SPACE)
MARK = CodePoints.parse(tables.MARK)
BLANK = CodePoints.parse(tables.BLANK)
VISIBLE = CodePoints.parse(tables.VISIBLE)
#: Every character allowed on its own, anywhere.
ALLOWED = SPACE | MARK | BLANK | VISIBLE
VIRAMA = CodePoints.parse(tables.VIRAMA)
JOINING = CodePoints.parse(tables.JOINING)
JOIN_TRANSPARENT = CodePoints.parse(tables.JOINING_TRANSPARENT)
PICTOGRAPHIC = CodePoints.parse(tables.EXTENDED_PICTOGRAPHIC)
EMOJI_MODIFIER = CodePoints.parse(tables.EMOJI_MODIFIER)


def _u(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def _joiner_allowed(value: str, i: int) -> bool:
    """Whether the ZWNJ or ZWJ at `value[i]` stands where a script or an emoji needs it."""
    before = value[i - 1] if i > 0 else ""
    if before in VIRAMA:
        return True
    if value[i] == ZWNJ:
        j = i - 1
        while j >= 0 and value[j] in JOIN_TRANSPARENT:
            j -= 1
        if j < 0 or value[j] not in JOINING:
            return False
        k = i + 1
        while k < len(value) and value[k] in JOIN_TRANSPARENT:
            k += 1
        return k < len(value) and value[k] in JOINING
    after = value[i + 1] if i + 1 < len(value) else ""
    element_end = before in PICTOGRAPHIC or (
        (before == EMOJI_PRESENTATION or before in EMOJI_MODIFIER)
        and i >= 2
        and value[i - 2] in PICTOGRAPHIC
    )
    return element_end and after in PICTOGRAPHIC


def _tag_spec(ch: str) -> bool:
    return TAG_SPEC[0] <= ord(ch) <= TAG_SPEC[1]


def _refused(ch: str) -> str:
    """Why `ch` is refused, for the error message."""
    cp = ord(ch)
    category = unicodedata.category(ch)
    if ch in (ZWJ, ZWNJ):
        what = (
            "a zero width joiner outside an emoji sequence or a virama cluster"
            if ch == ZWJ
            else "a zero width non-joiner outside a word of a joining script or a virama cluster"
        )
    elif 0xE0000 <= cp <= 0xE007F:
        what = "tag characters outside an emoji flag sequence"
    elif cp in PLACEHOLDERS:
        what = "a replacement character (U+FFFD: text damaged by a decoder) or U+FFFC"
    elif category == "Co":
        what = "private-use characters"
    elif category == "Cn":
        what = "unassigned code points or noncharacters"
    elif category == "Cs":
        what = "lone surrogates"
    elif category in ("Zl", "Zp"):
        what = "line or paragraph separators"
    elif category == "Cc":
        what = "control characters"
    else:
        what = "invisible format characters"
    return f"must not contain {what} (found {_u(ch)})"


def character_problem(value: str) -> str | None:
    """Why some character of `value` is refused where it stands, or None."""
    n = len(value)
    i = 0
    while i < n:
        ch = value[i]
        if ch in ALLOWED:
            if ch == BLACK_FLAG and i + 1 < n and _tag_spec(value[i + 1]):
                j = i + 1
                while j < n and _tag_spec(value[j]):
                    j += 1
                if j < n and value[j] == CANCEL_TAG:
                    i = j + 1
                    continue
                return _refused(value[i + 1])
            i += 1
            continue
        if ch in (ZWJ, ZWNJ) and _joiner_allowed(value, i):
            i += 1
            continue
        return _refused(ch)
    return None


#: Printable ASCII (U+0020-U+007E): every character allowed anywhere, each one but the space
#: visible, none a mark (test_text_rules.py holds the tables to that), so a value of these alone
#: is judged without a look at each character: the names, emails and codes most values are.
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")


def text_problem(value: str, *, required: bool) -> str | None:
    """Why `value` is not acceptable text (checked as sent, judged trimmed), or None."""
    if _PRINTABLE_ASCII.fullmatch(value):
        return "must not be blank" if required and not value.strip(" ") else None
    return full_text_problem(value, required=required)


def full_text_problem(value: str, *, required: bool) -> str | None:
    """`text_problem`, each character looked at."""
    found = character_problem(value)
    if found is not None:
        return found
    text = value.strip()
    if not text:
        return "must not be blank" if required else None
    if text[0] in MARK:
        return f"must not start with a combining mark (found {_u(text[0])})"
    if not any(ch in VISIBLE for ch in text):
        return "must not be blank: it has no letter, digit, punctuation or symbol that shows"
    return None


@cache
def text_pattern(required: bool) -> str:
    """The same rule as `text_problem`, as a regular expression over the value as sent."""

    def cls(*sets: CodePoints) -> str:
        merged = sets[0]
        for other in sets[1:]:
            merged = merged | other
        return f"[{merged.regex_class()}]"

    joiners = f"[{ZWNJ}{ZWJ}]"
    virama_joiner = f"{cls(VIRAMA)}{joiners}"
    t = f"{cls(JOIN_TRANSPARENT)}*"
    joined = f"{cls(JOINING)}(?:{t}{ZWNJ}{t}{cls(JOINING)})+"
    element = f"{cls(PICTOGRAPHIC)}(?:{EMOJI_PRESENTATION}|{cls(EMOJI_MODIFIER)})?"
    emoji = f"{element}(?:{ZWJ}{element})+"
    flag = f"{BLACK_FLAG}[{_char(TAG_SPEC[0])}-{_char(TAG_SPEC[1])}]+{CANCEL_TAG}"
    # A visible unit (a joined word, an emoji or flag sequence, a visible character) and what
    # may follow it before the next one (spaces, marks, blank graphics, a virama's joiner).
    # Everything allowed is one or the other, so the value after its blank start is one or
    # more such runs: each large class appears once (a generator, Hypothesis through
    # schemathesis, builds every occurrence of a class character by character).
    visible = f"(?:{joined}|{emoji}|{flag}|{cls(VISIBLE)})"
    trailing = f"(?:{virama_joiner}|{cls(SPACE, BLANK, MARK)})*"
    blank_start = f"(?:{cls(BLANK)}(?:{cls(SPACE, BLANK, MARK)}|{virama_joiner})*)?"
    body = f"{cls(SPACE)}*{blank_start}(?:{visible}{trailing})+"
    return f"^{body}$" if required else f"^(?:{cls(SPACE)}*|{body})$"


TEXT_DESCRIPTION = (
    "Letters, digits, punctuation, symbols, spaces and combining marks (not first); ZWNJ/ZWJ "
    "only where a script needs them (RFC 5892 A.1/A.2) or inside an emoji ZWJ sequence; tags "
    "only in emoji flag sequences; no control, format, private-use, unassigned or "
    "noncharacter code points, default-ignorables or U+FFFC/U+FFFD; surrounding white space "
    "is trimmed"
)
