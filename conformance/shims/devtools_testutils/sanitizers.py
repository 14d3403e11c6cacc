"""No recordings locally: the sanitizers have nothing to do."""

from __future__ import annotations

from typing import Any


def add_remove_header_sanitizer(**kwargs: Any) -> None:
    return None


def add_general_regex_sanitizer(**kwargs: Any) -> None:
    return None


def add_oauth_response_sanitizer(**kwargs: Any) -> None:
    return None
