"""Writes src/cosmos_outbox/text/_unicode_tables.py: the Unicode data the text rules of
`cosmos_outbox.text` need.

    python packages/cosmos-outbox/scripts/generate_unicode_tables.py [--check]

Python's `unicodedata` has categories and combining classes but not the properties the rules
also need (joining types, Extended_Pictographic, Emoji_Modifier, Default_Ignorable_Code_Point,
Variation_Selector); the `regex` module carries them (`\\p{...}`), so they come from it, here,
at build time: the package imports only the standard library and pydantic for its text rules,
and does not depend on `regex`. Only code points assigned in this Python's `unicodedata` are
kept, so every rule speaks of one Unicode version. `--check` exits 1 when the committed file
differs (the package's test of the text rules does the same).
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from collections.abc import Iterable
from pathlib import Path

import regex

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cosmos_outbox.text._rules import CharClass, classify  # noqa: E402

TARGET = ROOT / "src" / "cosmos_outbox" / "text" / "_unicode_tables.py"

_PROPERTIES = {
    "JOINING": r"[\p{Joining_Type=Dual_Joining}\p{Joining_Type=Left_Joining}"
    r"\p{Joining_Type=Right_Joining}]",
    "JOINING_TRANSPARENT": r"\p{Joining_Type=Transparent}",
    "EXTENDED_PICTOGRAPHIC": r"\p{Extended_Pictographic}",
    "EMOJI_MODIFIER": r"\p{Emoji_Modifier}",
}


def _code_points() -> str:
    return "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)


def _property(everything: str, expression: str) -> set[int]:
    return {ord(ch) for ch in regex.findall(expression, everything)}


def _ranges(code_points: Iterable[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for cp in sorted(code_points):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def _table(name: str, comment: str, code_points: Iterable[int]) -> str:
    """`NAME = "lo-hi lo ..."`: hexadecimal, inclusive ranges, a single code point alone. A
    string (parsed at import by the text rules) compiles much faster than a tuple of tuples, and
    no bytecode is shipped to Azure."""
    tokens = [f"{lo:04X}" if lo == hi else f"{lo:04X}-{hi:04X}" for lo, hi in _ranges(code_points)]
    lines: list[str] = []
    for token in tokens:
        if lines and len(lines[-1]) + len(token) < 88:
            lines[-1] += f" {token}"
        else:
            lines.append(token)
    rows = [f'    "{line} "' for line in lines]
    return "\n".join([f"#: {comment}", f"{name} = (", *rows, ")", ""])


def source() -> str:
    """The text of the tables module, computed afresh."""
    everything = _code_points()
    ignorable = _property(everything, r"\p{Default_Ignorable_Code_Point}")
    selectors = _property(everything, r"\p{Variation_Selector}")
    classes: dict[CharClass, set[int]] = {c: set() for c in CharClass}
    for cp in range(0x110000):
        classes[
            classify(cp, default_ignorable=cp in ignorable, variation_selector=cp in selectors)
        ].add(cp)
    allowed = set().union(*(classes[c] for c in CharClass if c is not CharClass.REFUSED))
    props = {name: _property(everything, expr) & allowed for name, expr in _PROPERTIES.items()}
    virama = {cp for cp in allowed if unicodedata.combining(chr(cp)) == 9}
    # The grammar of the text rules relies on these: every sequence that carries a visible
    # character starts with one, and the contexts do not overlap where it matters.
    starts = props["JOINING"] | props["EXTENDED_PICTOGRAPHIC"]
    assert starts <= classes[CharClass.VISIBLE]
    assert virama <= classes[CharClass.MARK]
    assert not props["EXTENDED_PICTOGRAPHIC"] & (props["JOINING_TRANSPARENT"] | props["JOINING"])
    header = f'''"""Unicode data for the text rules of `cosmos_outbox.text`. GENERATED: do not
edit; run packages/cosmos-outbox/scripts/generate_unicode_tables.py.

From this Python's `unicodedata` (Unicode {unicodedata.unidata_version}: categories, combining
classes, what is assigned) and the `regex` module (Joining_Type,
Extended_Pictographic, Emoji_Modifier, Default_Ignorable_Code_Point, Variation_Selector), for
the code points Unicode {unicodedata.unidata_version} assigns. Each table is a string of
inclusive ranges of hexadecimal code points ("0600-0605 061C").
"""

UNICODE_VERSION = "{unicodedata.unidata_version}"

'''
    tables = [
        _table("SPACE", "What str.strip() trims (and is not refused).", classes[CharClass.SPACE]),
        _table("MARK", "Combining marks (M*) that are not refused.", classes[CharClass.MARK]),
        _table("BLANK", "Graphic characters that render as nothing.", classes[CharClass.BLANK]),
        _table(
            "VISIBLE",
            "Letters, digits, punctuation and symbols that show.",
            classes[CharClass.VISIBLE],
        ),
        _table("VIRAMA", "Canonical combining class 9 (Virama).", virama),
        _table(
            "JOINING", "Joining_Type L, D or R: the letters of cursive scripts.", props["JOINING"]
        ),
        _table(
            "JOINING_TRANSPARENT", "Joining_Type=T (allowed ones).", props["JOINING_TRANSPARENT"]
        ),
        _table(
            "EXTENDED_PICTOGRAPHIC",
            "Extended_Pictographic (assigned).",
            props["EXTENDED_PICTOGRAPHIC"],
        ),
        _table("EMOJI_MODIFIER", "Emoji_Modifier (skin tones).", props["EMOJI_MODIFIER"]),
    ]
    return header + "\n".join(tables)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if the committed file is not what would be written",
    )
    args = parser.parse_args(argv)
    text = source()
    if args.check:
        same = TARGET.is_file() and TARGET.read_text(encoding="utf-8") == text
        print(f"{TARGET.relative_to(ROOT)}: {'up to date' if same else 'OUT OF DATE'}")
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
