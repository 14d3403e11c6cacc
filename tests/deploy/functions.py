"""What the contacts app declares, read from its indexed functions (importing function_app opens
nothing: tests/repository/test_layering.py), and the app-setting names a source file binds with."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from tests.deploy.templates import ROOT

FUNCTION_APP = ROOT / "function_app.py"
_SETTING = re.compile(r"%([A-Za-z_][A-Za-z0-9_]*)%")


def _indexed() -> dict[str, dict[str, Any]]:
    """Function name -> its binding metadata, as the worker indexes the app."""
    from tests.contacts.conftest import indexed_functions

    return {name: json.loads(f.get_function_json()) for name, f in indexed_functions().items()}


def _trigger(metadata: dict[str, Any]) -> dict[str, Any]:
    trigger: dict[str, Any] = metadata["bindings"][0]
    return trigger


def http_functions() -> set[str]:
    return {n for n, m in _indexed().items() if _trigger(m)["type"] == "httpTrigger"}


def admin_functions() -> set[str]:
    """HTTP functions with auth level ADMIN (the host's master key)."""
    return {
        n
        for n, m in _indexed().items()
        if _trigger(m)["type"] == "httpTrigger" and _trigger(m)["authLevel"] == "ADMIN"
    }


def console_functions() -> set[str]:
    """The operators' routes for a signed-in operator and the console page (outbox/console...:
    auth level ANONYMOUS for the host; the library admits a signed-in operator)."""
    return {
        n
        for n, m in _indexed().items()
        if _trigger(m)["type"] == "httpTrigger"
        and str(_trigger(m).get("route", "")).startswith("outbox/console")
    }


def trigger_functions() -> set[str]:
    return set(_indexed()) - http_functions()


def app_setting_expressions() -> set[str]:
    """Names the contacts app binds with: %NAME% expressions and connection names."""
    names = set()
    for metadata in _indexed().values():
        for binding in metadata["bindings"]:
            for key, value in binding.items():
                if not isinstance(value, str):
                    continue
                if key in {"connection", "connectionStringSetting"}:
                    names.add(value)
                names.update(_SETTING.findall(value))
    return names


def setting_expressions(path: Path) -> set[str]:
    """Names used as %NAME% app-setting expressions and as binding connection names in a source
    file whose functions are decorated directly (the subscriber app).

    Read from the keyword arguments of calls (the binding decorators), so a %NAME% in a
    docstring or comment does not count.
    """
    names = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if not (
                isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str)
            ):
                continue
            text = keyword.value.value
            if keyword.arg in {"connection", "connection_string_setting"}:
                names.add(text)
            names.update(_SETTING.findall(text))
    return names
