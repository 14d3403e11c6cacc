"""What function_app.py declares, read from its source (no import: the app is not started)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.deploy.templates import ROOT

FUNCTION_APP = ROOT / "function_app.py"


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    names = []
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            names.append(f"{target.value.id}.{target.attr}")
    return names


def functions(path: Path = FUNCTION_APP) -> dict[str, list[str]]:
    """Function name -> its `app.*` decorators, for every top-level function bound by `app`."""
    tree = ast.parse(path.read_text("utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            decorators = [d for d in _decorator_names(node) if d.startswith("app.")]
            if decorators:
                found[node.name] = decorators
    return found


def http_functions() -> set[str]:
    return {name for name, decorators in functions().items() if "app.route" in decorators}


def admin_functions(path: Path = FUNCTION_APP) -> set[str]:
    """HTTP functions bound with `auth_level=func.AuthLevel.ADMIN` (the host's master key)."""
    found = set()
    for node in ast.parse(path.read_text("utf-8")).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and any(
                k.arg == "auth_level" and isinstance(k.value, ast.Attribute)
                and k.value.attr == "ADMIN" for k in decorator.keywords
            ):
                found.add(node.name)
    return found


def trigger_functions() -> set[str]:
    return {name for name, decorators in functions().items() if "app.route" not in decorators}


def setting_expressions(path: Path = FUNCTION_APP) -> set[str]:
    """Names used as %NAME% app-setting expressions and as binding connection names.

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
            names.update(re.findall(r"%([A-Za-z_][A-Za-z0-9_]*)%", text))
    return names
