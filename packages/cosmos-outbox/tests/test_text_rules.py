"""The text rules of `cosmos_outbox.text`, against Unicode's own data: the generated tables are
what the
generator makes; generated strings of each kind of character get the verdict the rules give
that kind (the oracle here is the `regex` module's Unicode properties and `unicodedata`, not the
tables); RFC 5892's contexts (the `idna` package's `valid_contextj`) and every emoji sequence of
the `emoji` package are accepted; and the OpenAPI pattern gives the check's verdict."""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import emoji
import idna.core
import pytest
import regex
from deadlines import LONG
from hypothesis import given, settings
from hypothesis import strategies as st

from cosmos_outbox.text._rules import (
    BLANK_GRAPHICS,
    MARK,
    PLACEHOLDERS,
    VISIBLE,
    ZWJ,
    ZWNJ,
    character_problem,
    full_text_problem,
    text_pattern,
    text_problem,
)
from cosmos_outbox.text._unicode_tables import UNICODE_VERSION

ROOT = Path(__file__).resolve().parents[1]  # the package

ACCEPTED = [
    "Ada",
    "Zoë",
    "  Ada  ",
    "O'Brien-Smith",
    "李小龍",
    "Ὀδυσσεύς",
    "José\u0301",
    "مهر\u200cآذر",  # Persian: ZWNJ as the half-space, after REH (right-joining)
    "می\u200cروم",  # Persian: ZWNJ after YEH (dual-joining): RFC 5892 A.1 as it stands
    "क्\u200dष",  # Devanagari: ZWJ after a virama
    "क्\u200cष",  # Devanagari: ZWNJ after a virama
    "ශ්\u200dරී",  # Sinhala: ZWJ after al-lakuna (virama)
    "👩\u200d🔬",
    "👨\u200d👩\u200d👧\u200d👦",
    "Zoë 👩\u200d🔬",
    "👩🏽\u200d🔬",
    "🏳\ufe0f\u200d🌈",
    "❤\ufe0f\u200d🔥",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # flag of Scotland
    "葛\U000e0100",  # an ideographic variation sequence (Japanese names)
    "\u2800Ada",  # a blank graphic is allowed when something shows
]

REFUSED = {
    "\u3164": "U+3164",
    "Ada\u3164": "U+3164",
    "\u115f": "U+115F",
    "\u1160": "U+1160",
    "\uffa0": "U+FFA0",
    "\u2800": "blank",
    "  \u2800  ": "blank",
    "\u0301": "combining mark",
    " \u0301Ada": "combining mark",
    "\ue000": "U+E000",
    "Ada\U000f0000": "U+F0000",
    "\ufffe": "U+FFFE",
    "\ufdd0": "U+FDD0",
    "\U0001ffff": "U+1FFFF",
    "Ad\ufffda": "U+FFFD",
    "\ufffc": "U+FFFC",
    "Ada\x00": "U+0000",
    "Ada\t": "U+0009",
    "Ada\n": "U+000A",
    "A\u200bda": "U+200B",
    "\u202eAda": "U+202E",
    "\u2066Ada\u2069": "U+2066",
    "Ada\u200e": "U+200E",
    "\u061cAda": "U+061C",
    "\ufeffAda": "U+FEFF",
    "A\u00adda": "U+00AD",
    "Ada\u2028": "U+2028",
    "Ada\u2029": "U+2029",
    "A\ud800da": "U+D800",
    "A\u034fda": "U+034F",
    "a\u200db": "U+200D",
    "a\u200cb": "U+200C",
    "\u200cب": "U+200C",
    "ب\u200c": "U+200C",
    "ب\u200c ر": "U+200C",
    "👩\u200d": "U+200D",
    "\u200d🔬": "U+200D",
    "a\u200d🔬": "U+200D",
    "Ada\U000e0041": "U+E0041",
    "🏴\U000e0067\U000e0062": "U+E0067",
    "\U000e0067\U000e007f": "U+E0067",
    "": "blank",
    "   ": "blank",
}


@pytest.mark.skipif(
    unicodedata.unidata_version != UNICODE_VERSION,
    reason=f"the tables are made from the Unicode {UNICODE_VERSION} of Python 3.13's unicodedata; "
    f"this Python has {unicodedata.unidata_version} (the rules use the tables, not it)",
)
def test_the_unicode_tables_are_what_the_generator_makes() -> None:
    run = subprocess.run(
        [sys.executable, "scripts/generate_unicode_tables.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=LONG,  # a hang guard: the tables made again and compared
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("value", ACCEPTED)
def test_names_in_every_script_and_emoji_sequences_are_accepted(value: str) -> None:
    assert text_problem(value, required=True) is None


@pytest.mark.parametrize(("value", "reason"), REFUSED.items())
def test_invisible_blank_private_and_damaged_text_is_refused_saying_why(
    value: str, reason: str
) -> None:
    problem = text_problem(value, required=True)
    assert problem is not None and reason in problem


def test_an_optional_value_may_be_empty_but_not_look_empty() -> None:
    assert text_problem("", required=False) is None
    assert text_problem("   ", required=False) is None
    assert text_problem("\u2800", required=False) is not None
    assert text_problem("\u0301", required=False) is not None


# -- the kinds of character, with Unicode's data as the oracle -----------------------------------


def _is(prop: str, ch: str) -> bool:
    return regex.match(rf"\p{{{prop}}}", ch) is not None


def shows(ch: str) -> bool:
    """A letter, digit, punctuation mark or symbol that renders, by Unicode's properties."""
    return (
        unicodedata.category(ch)[0] in "LNPS"
        and not _is("Default_Ignorable_Code_Point", ch)
        and ord(ch) not in BLANK_GRAPHICS | PLACEHOLDERS
    )


visible = st.characters(categories=["L", "N", "P", "S"]).filter(shows)
spaces = st.characters(categories=["Zs"])
marks = st.characters(categories=["Mn", "Mc", "Me"]).filter(
    lambda ch: not _is("Default_Ignorable_Code_Point", ch) or _is("Variation_Selector", ch)
)


@given(st.text(visible | spaces | marks, max_size=40), visible, st.text(spaces, max_size=3))
def test_text_of_visible_characters_spaces_and_marks_is_accepted(
    tail: str, first: str, pad: str
) -> None:
    assert text_problem(pad + first + tail + pad, required=True) is None


@pytest.mark.parametrize("category", ["Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"])
@settings(max_examples=40)
@given(data=st.data())
def test_a_character_of_a_refused_category_is_refused_anywhere(
    category: str, data: st.DataObject
) -> None:
    drawn = st.characters(categories=[category])  # type: ignore[list-item]
    if category == "Cn":  # unassigned in this Python's Unicode and in the tables' (3.11: 14.0)
        drawn = drawn.filter(lambda ch: ch not in VISIBLE and ch not in MARK)
    ch = data.draw(drawn)
    where = data.draw(st.integers(0, 3))
    value = "Ada"[:where] + ch + "Ada"[where:]
    problem = text_problem(value, required=True)
    assert problem is not None and f"U+{ord(ch):04X}" in problem


EVERY_CODE_POINT = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
IGNORABLE = regex.findall(
    r"[\p{Default_Ignorable_Code_Point}--\p{Variation_Selector}]", EVERY_CODE_POINT, flags=regex.V1
)


@given(st.sampled_from(IGNORABLE))
def test_default_ignorable_characters_are_refused_except_variation_selectors(ch: str) -> None:
    assert text_problem(f"A{ch}da", required=True) is not None


@given(st.text(spaces | st.sampled_from(sorted(map(chr, BLANK_GRAPHICS))) | marks, max_size=20))
def test_text_that_shows_nothing_is_blank(value: str) -> None:
    problem = text_problem(value, required=True)
    assert problem is not None
    assert "blank" in problem or "combining mark" in problem


@given(st.text(spaces, max_size=3), marks, st.text(visible, min_size=1, max_size=10))
def test_a_value_starting_with_a_combining_mark_is_refused(pad: str, mark: str, rest: str) -> None:
    problem = text_problem(pad + mark + rest, required=True)
    assert problem is not None and "combining mark" in problem


# -- joiners: RFC 5892 contexts, emoji sequences ---------------------------------------------------

# Arabic letters of each joining type (D, R, U, C), an Arabic mark (T), Devanagari letters, a
# virama and a nukta (T, not a virama), Latin, and the joiners.
JOINER_ALPHABET = st.sampled_from(
    [
        "\u0628",
        "\u0647",
        "\u0631",
        "\u0627",
        "\u0621",
        "\u0640",
        "\u064e",
        "\u0915",
        "\u0937",
        "\u094d",
        "\u093c",
        "a",
        " ",
        ZWNJ,
        ZWJ,
    ]
)


@settings(max_examples=400)
@given(st.text(JOINER_ALPHABET, min_size=1, max_size=12))
def test_every_joiner_rfc_5892_allows_is_allowed(value: str) -> None:
    joiners = [i for i, ch in enumerate(value) if ch in (ZWJ, ZWNJ)]
    if all(idna.core.valid_contextj(value, i) for i in joiners):
        assert character_problem(value) is None
    if any(value[i] == ZWJ and not idna.core.valid_contextj(value, i) for i in joiners):
        # a ZWJ is only allowed after a virama (RFC 5892 A.2) or in an emoji sequence
        assert character_problem(value) is not None


def _assigned(sequence: str) -> bool:
    return all(unicodedata.category(ch) != "Cn" for ch in sequence)


EMOJI = sorted(seq for seq in emoji.EMOJI_DATA if _assigned(seq))


def test_every_emoji_sequence_of_this_unicode_version_is_accepted() -> None:
    assert len(EMOJI) > 5000
    refused = [
        seq
        for seq in EMOJI
        if text_problem(f"Zoë {seq}", required=True) is not None
        or text_problem(seq, required=True) is not None
    ]
    assert refused == []


# -- the OpenAPI pattern is the same rule ------------------------------------------------------

MIXED = st.sampled_from(
    [
        "a",
        "é",
        "\u0301",
        " ",
        "\u3000",
        "\u2800",
        "\u3164",
        "\x00",
        "\ufffd",
        "\ue000",
        "\u0628",
        "\u0631",
        "\u064e",
        "\u0640",
        "\u0915",
        "\u094d",
        "👩",
        "🔬",
        "\ufe0f",
        "\U0001f3fd",
        "🏴",
        "\U000e0067",
        "\U000e007f",
        ZWJ,
        ZWNJ,
        "\u200b",
    ]
)


@settings(max_examples=500)
@given(st.text(MIXED | st.characters(), max_size=14), st.booleans())
def test_the_pattern_gives_the_checks_verdict(value: str, required: bool) -> None:
    matched = re.fullmatch(text_pattern(required), value) is not None
    assert matched == (text_problem(value, required=required) is None)


@pytest.mark.parametrize("value", [*ACCEPTED, *REFUSED, *EMOJI[::50]])
def test_the_pattern_gives_the_checks_verdict_on_the_named_cases(value: str) -> None:
    for required in (True, False):
        matched = re.fullmatch(text_pattern(required), value) is not None
        assert matched == (text_problem(value, required=required) is None)


PRINTABLE_ASCII = [chr(c) for c in range(0x20, 0x7F)]


def test_printable_ascii_is_allowed_anywhere_and_shows_but_the_space() -> None:
    """What the fast path of `text_problem` takes for granted, from the tables."""
    for ch in PRINTABLE_ASCII:
        assert character_problem(ch) is None, ch
        assert ch not in MARK, ch
        assert (ch in VISIBLE) == (ch != " "), ch


@settings(max_examples=500)
@given(st.text(st.sampled_from([*PRINTABLE_ASCII, "\t", "\x7f", "é"]), max_size=12), st.booleans())
def test_the_fast_path_gives_the_full_checks_verdict(value: str, required: bool) -> None:
    assert text_problem(value, required=required) == full_text_problem(value, required=required)
