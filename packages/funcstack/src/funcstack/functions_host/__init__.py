"""The local Functions host: serves a Python v2-programming-model app through the real worker
library (``azure-functions-runtime``), without Core Tools. See docs/functions-host.md."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from funcstack.functions_host._cosmos_trigger import VERIFY_TLS_SETTING
    from funcstack.functions_host._launcher import RunnerStartError, RunningRunner, start_runner
    from funcstack.functions_host._runner import Runner

__all__ = [
    "VERIFY_TLS_SETTING",
    "Runner",
    "RunnerStartError",
    "RunningRunner",
    "start_runner",
]

_WHERE = {
    "Runner": "funcstack.functions_host._runner",
    "RunnerStartError": "funcstack.functions_host._launcher",
    "RunningRunner": "funcstack.functions_host._launcher",
    "start_runner": "funcstack.functions_host._launcher",
    "VERIFY_TLS_SETTING": "funcstack.functions_host._cosmos_trigger",
}


def __getattr__(name: str) -> Any:
    """The public names, imported when first used (the worker and the pytest plugin
    import this package: they pay only for what they use)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
