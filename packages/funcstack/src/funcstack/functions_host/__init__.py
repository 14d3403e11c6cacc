"""The local Functions host: serves a Python v2-programming-model app through the real worker
library (``azure-functions-runtime``), without Core Tools. See docs/functions-host.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from funcstack._lazy import lazy_exports

if TYPE_CHECKING:
    from funcstack.functions_host._connections import VERIFY_TLS_SETTING
    from funcstack.functions_host._launcher import (
        HostOptions,
        RunnerStartError,
        RunningRunner,
        start_runner,
    )
    from funcstack.functions_host._runner import Runner

__all__ = [
    "VERIFY_TLS_SETTING",
    "HostOptions",
    "Runner",
    "RunnerStartError",
    "RunningRunner",
    "start_runner",
]

# the public names, imported when first used (funcstack/_lazy.py)
__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "HostOptions": "funcstack.functions_host._launcher",
        "Runner": "funcstack.functions_host._runner",
        "RunnerStartError": "funcstack.functions_host._launcher",
        "RunningRunner": "funcstack.functions_host._launcher",
        "start_runner": "funcstack.functions_host._launcher",
        "VERIFY_TLS_SETTING": "funcstack.functions_host._connections",
    },
)
