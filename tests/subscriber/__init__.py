"""Tests of the subscriber app (subscriber/): its package is imported as `contacts_projection`,
the name it has when the Functions host loads subscriber/ as the app folder."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

SUBSCRIBER_DIR = Path(__file__).resolve().parents[2] / "subscriber"
if str(SUBSCRIBER_DIR) not in sys.path:
    sys.path.append(str(SUBSCRIBER_DIR))  # appended: the contacts app's function_app.py wins


def subscriber_functions() -> dict[str, Any]:
    """The subscriber app's indexed functions, as function.json documents by name (its
    function_app.py loaded under a name of its own: the contacts app's is `function_app`)."""
    spec = importlib.util.spec_from_file_location(
        "subscriber_function_app", SUBSCRIBER_DIR / "function_app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {
        str(f.get_function_name()): json.loads(f.get_function_json())
        for f in module.app.get_functions()
    }
