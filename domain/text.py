"""What a text field of a contact may hold: no control characters (NUL included), no invisible
format characters (zero-width space, bidi overrides, BOM, ...), no lone surrogates and no line or
paragraph separators; blank-only values do not count as given.

The rules are regular expressions built from the Unicode categories, so the validator and the
OpenAPI `pattern` are the same string.
"""

from __future__ import annotations

import unicodedata

#: Control (Cc), format (Cf), surrogate (Cs), line (Zl) and paragraph (Zp) separators.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _ranges(codepoints: list[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for cp in codepoints:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def _char(cp: int) -> str:
    """A character inside a regex class: escaped where a class would read it as syntax; other
    characters as themselves (so the pattern means the same to Python, Rust and ECMA-262 `u`)."""
    if chr(cp) in "\\]^-[":
        return "\\" + chr(cp)
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    return chr(cp)


def _class(codepoints: list[int]) -> str:
    # Lone surrogates cannot be written in a JSON-schema (ECMA-262 `u` / Rust) pattern; they are
    # refused all the same by `refused_character`, and no UTF-8 request can carry one unescaped.
    codepoints = [cp for cp in codepoints if not 0xD800 <= cp <= 0xDFFF]
    return "".join(
        _char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in _ranges(codepoints)
    )


#: Planes 4-13 are unassigned and 15-16 private use; skipping them keeps import cheap (a unit
#: test checks the full range).
SCANNED = (range(0x40000), range(0xE0000, 0xF0000))
_REFUSED_CPS = [
    cp for plane in SCANNED for cp in plane
    if unicodedata.category(chr(cp)) in REFUSED_CATEGORIES
]
_REFUSED_SET = frozenset(map(chr, _REFUSED_CPS))
_SPACE_CPS = [cp for cp in range(0x10000) if chr(cp).isspace() and chr(cp) not in _REFUSED_SET]

REFUSED = _class(_REFUSED_CPS)
SPACE = _class(_SPACE_CPS)

#: Any text without refused characters (may be empty or blank).
TEXT_PATTERN = f"^[^{REFUSED}]*$"
#: As TEXT_PATTERN, with at least one character that is not white space.
NONBLANK_TEXT_PATTERN = f"^[^{REFUSED}]*[^{REFUSED}{SPACE}][^{REFUSED}]*$"


def refused_character(value: str) -> str | None:
    """The first refused character of `value`, as U+XXXX, or None."""
    for ch in value:
        if ch in _REFUSED_SET:
            return f"U+{ord(ch):04X}"
    return None
