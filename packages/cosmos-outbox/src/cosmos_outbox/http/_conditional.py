"""Conditional requests (RFC 9110 §13): entity-tag lists, `*`, strong and weak comparison and
the order in which the preconditions are evaluated. Pure: no HTTP framework, no storage.

`If-Unmodified-Since` and `If-Modified-Since` are not evaluated: the API sends no
`Last-Modified`, and RFC 9110 §13.1.3/§13.1.4 let a server without a modification date
ignore them.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Literal, TypeAlias


class MalformedConditionError(ValueError):
    """A conditional header is not a valid `"*" / #entity-tag` list."""

    def __init__(self, header: str, reason: str) -> None:
        super().__init__(f"{header}: {reason}")
        self.header = header
        self.reason = reason


@dataclass(frozen=True)
class EntityTag:
    """`opaque` includes the double quotes; a weak tag was sent with the `W/` prefix."""

    opaque: str
    weak: bool = False

    def strong_match(self, other: EntityTag) -> bool:
        return not self.weak and not other.weak and self.opaque == other.opaque

    def weak_match(self, other: EntityTag) -> bool:
        return self.opaque == other.opaque

    def __str__(self) -> str:
        return f"W/{self.opaque}" if self.weak else self.opaque


TagList: TypeAlias = Literal["*"] | tuple[EntityTag, ...]

#: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE; etagc = %x21 / %x23-7E / obs-text (%x80-FF).
ENTITY_TAG = r'(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"'
#: `"*" / #entity-tag` with optional white space and empty list elements (RFC 9110 §5.6.1).
#: The parser below and the OpenAPI `pattern` of the headers are this one expression.
TAG_LIST_PATTERN = (
    rf"^(?:[ \t]*\*[ \t]*|[ \t,]*(?:{ENTITY_TAG}(?:[ \t]*,[ \t,]*{ENTITY_TAG})*)?[ \t,]*)$"
)
_TAG_LIST = re.compile(TAG_LIST_PATTERN)
_TAG = re.compile(ENTITY_TAG)


def parse_tag_list(value: str, *, header: str = "If-Match") -> TagList | None:
    """`*` or the entity tags of a field value; None when it holds no element at all. Raises
    MalformedConditionError for anything that is not `"*" / #entity-tag`."""
    if not value.strip(" \t,"):
        return None
    if not _TAG_LIST.fullmatch(value):
        raise MalformedConditionError(
            header, '`*` or a comma-separated list of quoted entity tags, e.g. "abc", W/"abc"'
        )
    if value.strip(" \t") == "*":
        return "*"
    return tuple(
        EntityTag(tag.removeprefix("W/"), weak=tag.startswith("W/")) for tag in _TAG.findall(value)
    )


class Outcome(enum.Enum):
    PROCEED = "proceed"
    NOT_MODIFIED = "not modified"  # 304, only for GET and HEAD
    PRECONDITION_FAILED = "precondition failed"  # 412


@dataclass(frozen=True)
class Preconditions:
    """The preconditions of one request on a resource that exists. (When the resource does not
    exist the answer without preconditions, 404, wins: RFC 9110 §13.2.1.)"""

    if_match: TagList | None = None
    if_none_match: TagList | None = None

    @classmethod
    def parse(
        cls,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
        etag: str | None = None,
    ) -> Preconditions:
        """From the header values. The reference sample's request header `ETag` counts as
        `If-Match` when there is no `If-Match`."""
        match = parse_tag_list(if_match, header="If-Match") if if_match else None
        if match is None and etag:
            match = parse_tag_list(etag, header="ETag")
        none_match = (
            parse_tag_list(if_none_match, header="If-None-Match") if if_none_match else None
        )
        return cls(if_match=match, if_none_match=none_match)

    @property
    def unconditional(self) -> bool:
        return self.if_match is None and self.if_none_match is None

    def evaluate(self, current_etag: str, *, safe: bool) -> Outcome:
        """RFC 9110 §13.2.2 for a resource whose current (strong) etag is `current_etag`;
        `safe` for GET and HEAD."""
        current = EntityTag(current_etag)
        if (
            self.if_match is not None
            and self.if_match != "*"
            and not any(tag.strong_match(current) for tag in self.if_match)
        ):
            return Outcome.PRECONDITION_FAILED
        if self.if_none_match is not None and (
            self.if_none_match == "*" or any(tag.weak_match(current) for tag in self.if_none_match)
        ):
            return Outcome.NOT_MODIFIED if safe else Outcome.PRECONDITION_FAILED
        return Outcome.PROCEED
