"""Request parsing that holds under hostile input: the body (size, media type, encoding, JSON
syntax, depth, number size, duplicate keys) and the query and header values the API reads.
Everything wrong becomes an HttpProblemError (4xx); nothing here can raise anything else.

Decisions:
- The body is UTF-8 JSON (RFC 8259 §8.1): other encodings, a byte order mark and a `charset`
  other than utf-8 are refused (400 / 415).
- Duplicate object keys are refused (400, naming the key): parsers disagree on which one wins,
  so accepting them would let two components read different values.
- Nesting deeper than MAX_DEPTH and integer literals longer than MAX_INT_DIGITS are refused
  (400); NaN and Infinity are not JSON and are refused.
- Only camelCase field names are accepted (validation by alias only).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from cosmos_outbox.http._problems import HttpProblemError, bad_request, field_errors

M = TypeVar("M", bound="BaseModel")

MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 16
MAX_INT_DIGITS = 64
_JSON_TYPE = re.compile(r"application/(?:[A-Za-z0-9!#$&^_.-]+\+)?json", re.IGNORECASE)
_PARAM = re.compile(r"\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*=\s*(\"[^\"]*\"|[^;\s]*)\s*")


def _media_type(header: str) -> tuple[str, dict[str, str]]:
    media, _, rest = header.partition(";")
    params: dict[str, str] = {}
    for part in rest.split(";") if rest else ():
        m = _PARAM.fullmatch(part)
        if m is None:
            raise HttpProblemError(
                415, "Unsupported Media Type", "the Content-Type header is malformed"
            )
        params[m.group(1).lower()] = m.group(2).strip('"')
    return media.strip(), params


def check_json_content_type(header: str | None) -> None:
    media, params = _media_type(header or "")
    if not _JSON_TYPE.fullmatch(media):
        raise HttpProblemError(415, "Unsupported Media Type", "send the body as application/json")
    if params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
        raise HttpProblemError(415, "Unsupported Media Type", "send the body in UTF-8")


def _depth_exceeds(text: str, limit: int) -> bool:
    """True when arrays/objects nest deeper than `limit` (strings skipped)."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


class _RefusedError(ValueError):
    def __init__(self, detail: str, field: str = "$") -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _RefusedError(f"the key {json.dumps(key)} appears more than once", key)
        result[key] = value
    return result


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _RefusedError(f"a number has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _constant(name: str) -> Any:
    raise _RefusedError(f"{name} is not JSON")


def parse_json(body: bytes) -> Any:
    """The JSON value of a UTF-8 body; HttpProblemError (400) for anything else."""
    if body.startswith(b"\xef\xbb\xbf"):
        raise bad_request("the body starts with a byte order mark; send UTF-8 without one", "$")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("the body is not valid UTF-8", "$") from None
    if _depth_exceeds(text, MAX_DEPTH):
        raise bad_request(f"the body nests deeper than {MAX_DEPTH} levels", "$")
    try:
        return json.loads(
            text, object_pairs_hook=_object, parse_int=_integer, parse_constant=_constant
        )
    except _RefusedError as exc:
        raise bad_request(exc.detail, exc.field) from None
    except json.JSONDecodeError as exc:
        raise bad_request(
            f"the body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", "$"
        ) from None
    except (ValueError, RecursionError):
        raise bad_request("the body is not valid JSON", "$") from None


def parse_body(body: bytes, content_type: str | None, model: type[M]) -> M:
    """413 over 64 KiB, 415 unless JSON in UTF-8, 400 for bad JSON or invalid fields."""
    if len(body) > MAX_BODY_BYTES:
        raise HttpProblemError(
            413, "Content Too Large", f"the body is larger than {MAX_BODY_BYTES} bytes"
        )
    check_json_content_type(content_type)
    data = parse_json(body)
    if not isinstance(data, dict):
        raise bad_request("the body must be a JSON object", "$")
    try:
        return model.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise HttpProblemError(
            400, "Bad Request", "the request is not valid", errors=field_errors(exc)
        ) from None
