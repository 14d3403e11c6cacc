"""The text rules of the outbox's text types (`Text`): `text_problem` says what is wrong with a
value (None when nothing is), `text_pattern` is the same rules as the JSON Schema `pattern` the
OpenAPI document gives, and `REFUSED_CATEGORIES` the Unicode general categories refused
wherever they stand."""

from __future__ import annotations

from cosmos_outbox._text import Text
from cosmos_outbox._text._rules import REFUSED_CATEGORIES, text_pattern, text_problem

__all__ = ["REFUSED_CATEGORIES", "Text", "text_pattern", "text_problem"]
