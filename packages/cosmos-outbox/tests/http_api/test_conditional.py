"""Conditional requests (RFC 9110 §13): parsing of entity-tag lists and the evaluation order,
as properties over generated tags and header values."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cosmos_outbox.http._conditional import (
    TAG_LIST_PATTERN,
    EntityTag,
    MalformedConditionError,
    Outcome,
    Preconditions,
    parse_tag_list,
)

#: etagc: %x21 / %x23-7E / obs-text (%x80-FF)
ETAGC = st.characters(codec="latin-1", min_codepoint=0x21, exclude_characters='"\x7f')
tags = st.builds(
    lambda text, weak: EntityTag(f'"{text}"', weak=weak), st.text(ETAGC, max_size=12), st.booleans()
)
ows = st.sampled_from(["", " ", "\t", " \t "])
CURRENT = '"00000a00-0000-0000-0000-5f5e0e5c0000"'


@given(st.lists(tags, min_size=1, max_size=6), ows, ows)
def test_a_list_of_entity_tags_parses_back_to_the_same_tags(
    listed: list[EntityTag], before: str, after: str
) -> None:
    value = f"{before},{after}".join(str(t) for t in listed)
    assert parse_tag_list(value) == tuple(listed)
    assert re.fullmatch(TAG_LIST_PATTERN, value)


@given(st.text(max_size=40))
def test_any_header_value_parses_or_is_malformed_never_anything_else(value: str) -> None:
    try:
        parsed = parse_tag_list(value)
    except MalformedConditionError:
        assert not re.fullmatch(TAG_LIST_PATTERN, value)
    else:
        assert parsed is None or parsed == "*" or all(isinstance(t, EntityTag) for t in parsed)


@given(st.lists(tags, max_size=4), st.booleans())
def test_if_match_proceeds_exactly_when_a_listed_strong_tag_equals_the_current_one(
    others: list[EntityTag], include_current: bool
) -> None:
    listed = [*others, EntityTag(CURRENT)] if include_current else others
    if not listed:
        return
    expected = include_current or any(t.strong_match(EntityTag(CURRENT)) for t in others)
    outcome = Preconditions(if_match=tuple(listed)).evaluate(CURRENT, safe=False)
    assert (outcome is Outcome.PROCEED) == expected


@given(st.lists(tags, max_size=4), st.booleans(), st.booleans())
def test_if_none_match_uses_weak_comparison_304_when_safe_412_otherwise(
    others: list[EntityTag], include_current: bool, safe: bool
) -> None:
    listed = [*others, EntityTag(CURRENT, weak=True)] if include_current else others
    if not listed:
        return
    matched = include_current or any(t.weak_match(EntityTag(CURRENT)) for t in others)
    outcome = Preconditions(if_none_match=tuple(listed)).evaluate(CURRENT, safe=safe)
    if not matched:
        assert outcome is Outcome.PROCEED
    else:
        assert outcome is (Outcome.NOT_MODIFIED if safe else Outcome.PRECONDITION_FAILED)


@given(st.booleans())
def test_a_failed_if_match_wins_over_if_none_match(safe: bool) -> None:
    conditions = Preconditions(if_match=(EntityTag('"other"'),), if_none_match="*")
    assert conditions.evaluate(CURRENT, safe=safe) is Outcome.PRECONDITION_FAILED


def test_star_matches_any_current_representation() -> None:
    assert Preconditions(if_match="*").evaluate(CURRENT, safe=False) is Outcome.PROCEED
    assert Preconditions(if_none_match="*").evaluate(CURRENT, safe=True) is Outcome.NOT_MODIFIED
    assert (
        Preconditions(if_none_match="*").evaluate(CURRENT, safe=False)
        is Outcome.PRECONDITION_FAILED
    )


@pytest.mark.parametrize(
    ("a", "b", "strong", "weak"),
    [
        # RFC 9110 §8.8.3.2
        ('W/"1"', 'W/"1"', False, True),
        ('W/"1"', 'W/"2"', False, False),
        ('W/"1"', '"1"', False, True),
        ('"1"', '"1"', True, True),
    ],
)
def test_the_comparison_table_of_rfc_9110(a: str, b: str, strong: bool, weak: bool) -> None:
    [left] = parse_tag_list(a) or ()
    [right] = parse_tag_list(b) or ()
    assert isinstance(left, EntityTag) and isinstance(right, EntityTag)
    assert left.strong_match(right) is strong
    assert left.weak_match(right) is weak


def test_the_reference_samples_etag_header_counts_as_if_match_unless_if_match_is_sent() -> None:
    assert Preconditions.parse(etag=CURRENT).if_match == (EntityTag(CURRENT),)
    assert Preconditions.parse(if_match='"x"', etag=CURRENT).if_match == (EntityTag('"x"'),)


@pytest.mark.parametrize("value", ["abc", '"unclosed', '*, "a"', '"a" "b"', "W/abc", '"a\x01"'])
def test_malformed_values_are_refused(value: str) -> None:
    with pytest.raises(MalformedConditionError):
        parse_tag_list(value)
