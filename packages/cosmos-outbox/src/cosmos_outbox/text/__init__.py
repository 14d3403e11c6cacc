"""Text fields whose published JSON schema is what they validate: `Text`, and its rules
(`text_problem` says what is wrong with a value, None when nothing is; `text_pattern` is the same
rules as the JSON Schema `pattern` the OpenAPI document gives; `REFUSED_CATEGORIES` the Unicode
general categories refused wherever they stand).

`Text` is the metadata of a constrained string: ``Annotated[str, Text(max_length=100)]``. A
value must follow the text rules (every script and emoji; no control, format, private-use,
unassigned or default-ignorable characters; joiners only where a script or an emoji sequence
needs them: `cosmos_outbox.text._rules` says which, from Unicode's own data); it is trimmed,
and its length limit applies to the value as sent. A required text (the default) must hold a
character that shows; an optional one may be empty.

Its JSON schema (what the OpenAPI document publishes) carries the same rule as a `pattern`,
`maxLength`, and `minLength: 1` when required. A pattern of the field's own (a
`StringConstraints(pattern=...)` before the `Text`) is kept: the rule's pattern is added beside
it under `allOf`, so the published schema refuses what validation refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from cosmos_outbox.text._rules import (
    REFUSED_CATEGORIES,
    TEXT_DESCRIPTION,
    text_pattern,
    text_problem,
)

__all__ = ["REFUSED_CATEGORIES", "Text", "text_pattern", "text_problem"]


@dataclass(frozen=True)
class Text:
    """A text field: at most `max_length` characters as sent, the text rules, trimmed; when
    `required`, at least one character that shows."""

    max_length: int
    required: bool = True

    def __call__(self, value: str) -> str:
        problem = text_problem(value, required=self.required)
        if problem is not None:
            raise ValueError(problem)
        return value.strip()

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        inner = handler(source)
        if inner.get("type") != "str":
            raise TypeError(f"Text applies to str fields, not {source!r}")
        limited = core_schema.str_schema(
            **{
                **{k: v for k, v in inner.items() if k != "type"},
                "max_length": min(self.max_length, inner.get("max_length") or self.max_length),
            }
        )
        return core_schema.no_info_after_validator_function(self, limited)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        published = handler(schema)
        rule = text_pattern(self.required)
        own = published.get("pattern")
        if own is None:
            published["pattern"] = rule
        elif own != rule:
            published["allOf"] = [*published.get("allOf", []), {"pattern": rule}]
        published.setdefault(
            "description",
            TEXT_DESCRIPTION + ("; at least one character that shows" if self.required else ""),
        )
        if self.required:
            published["minLength"] = max(1, published.get("minLength", 1))
        return published
