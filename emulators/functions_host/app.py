"""Import a v2-programming-model app and describe its functions, like the Python worker does."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import azure.functions as func
from azure.functions.decorators.function_app import Function, FunctionRegister
from azure.functions.decorators.retry_policy import RETRY_POLICY

from emulators.functions_host.config import HostJson, is_truthy
from emulators.functions_host.context import RunnerContext
from emulators.functions_host.retry import RetryPolicy

logger = logging.getLogger("emulators.functions_host")


class AppLoadError(RuntimeError):
    """The script cannot be imported or holds no FunctionApp."""


@dataclass
class FunctionSpec:
    """One indexed function: its trigger binding (as function.json would show it) and callable."""

    name: str
    trigger: dict[str, Any]
    bindings: list[dict[str, Any]]
    user_function: Callable[..., Any]
    retry: RetryPolicy | None
    directory: str = ""
    is_async: bool = field(init=False)
    context_param: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.is_async = inspect.iscoroutinefunction(self.user_function)
        self.context_param = None
        for param in inspect.signature(self.user_function).parameters.values():
            annotation = param.annotation
            if param.name == "context" or annotation is func.Context or annotation in {
                "func.Context",
                "azure.functions.Context",
                "Context",
            }:
                self.context_param = param.name
                break

    @property
    def trigger_type(self) -> str:
        return str(self.trigger.get("type", ""))

    @property
    def trigger_arg(self) -> str:
        return str(self.trigger.get("name", ""))

    async def invoke(
        self,
        executor: Executor,
        arguments: dict[str, Any],
        *,
        retry_count: int = 0,
        trace_parent: str = "",
    ) -> Any:
        """Call the user function: async ones on the loop, sync ones in the thread pool."""
        if self.context_param is not None:
            arguments[self.context_param] = RunnerContext(
                self.name,
                self.directory,
                trace_parent=trace_parent,
                retry_count=retry_count,
                max_retry_count=self.retry.max_retry_count if self.retry else 0,
            )
        if self.is_async:
            return await self.user_function(**arguments)
        loop = asyncio.get_running_loop()
        result: Awaitable[Any] = loop.run_in_executor(
            executor, functools.partial(self.user_function, **arguments)
        )
        return await result


def import_app(app_dir: Path, script: str) -> FunctionRegister:
    """Import ``script`` from ``app_dir`` (on ``sys.path``) and return its FunctionApp."""
    path = (app_dir / script).resolve()
    if not path.is_file():
        raise AppLoadError(f"script {path} not found")
    if str(app_dir.resolve()) not in sys.path:
        sys.path.insert(0, str(app_dir.resolve()))
    module_name = path.stem
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise AppLoadError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    apps = [v for v in vars(module).values() if isinstance(v, FunctionRegister)]
    if len(apps) != 1:
        raise AppLoadError(f"{path} must define exactly one FunctionApp, found {len(apps)}")
    return apps[0]


def _bindings(fn: Function) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(fn.get_function_json())
    bindings: list[dict[str, Any]] = data.get("bindings", [])
    return bindings


def _directory_of(function: Callable[..., Any]) -> str:
    try:
        source = inspect.getsourcefile(function)
    except TypeError:
        source = None
    return str(Path(source).parent) if source else ""


def index_functions(app: FunctionRegister, host: HostJson) -> list[FunctionSpec]:
    """``app.get_functions()`` (called once) -> specs; disabled functions are left out."""
    specs: list[FunctionSpec] = []
    for fn in app.get_functions():
        name = fn.get_function_name() or fn.get_user_function().__name__
        if is_truthy(os.environ.get(f"AzureWebJobs.{name}.Disabled")):
            logger.info("function %s is disabled by app setting", name)
            continue
        bindings = _bindings(fn)
        trigger = next((b for b in bindings if str(b.get("type", "")).endswith("Trigger")), None)
        if trigger is None:
            logger.warning("function %s has no trigger; skipped", name)
            continue
        retry_dict = fn.get_settings_dict(RETRY_POLICY)
        retry_source: dict[str, Any] | None = (
            {k: v for k, v in retry_dict.items() if k != "setting_name" and v is not None}
            if retry_dict
            else (dict(host.retry) if host.retry else None)
        )
        retry = RetryPolicy.from_mapping(retry_source) if retry_source else None
        specs.append(
            FunctionSpec(
                name=name,
                trigger=trigger,
                bindings=bindings,
                user_function=fn.get_user_function(),
                retry=retry,
                directory=_directory_of(fn.get_user_function()),
            )
        )
    return specs
