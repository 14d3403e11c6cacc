"""The few names of Azure's internal test package (azure-sdk-tools' ``devtools_testutils``,
not published on PyPI) that the SDK suites import, for runs against the local endpoints.

No recording, no test proxy: every run is "live" against the local stack. Resource preparers
pass through (resource groups and namespaces have no meaning locally); the Service Bus entity
preparers live in ``servicebus_preparer.py`` beside this package.
"""

from __future__ import annotations

import functools
import inspect
import time
import uuid
from collections.abc import Callable
from typing import Any

from azure.core.credentials import AccessToken

from devtools_testutils.helpers import is_live
from devtools_testutils.resource_testcase import RESOURCE_GROUP_PARAM

__all__ = [
    "RESOURCE_GROUP_PARAM",
    "AzureMgmtPreparer",
    "AzureMgmtRecordedTestCase",
    "AzureRecordedTestCase",
    "CachedResourceGroupPreparer",
    "FakeResource",
    "PowerShellPreparer",
    "RandomNameResourceGroupPreparer",
    "get_credential",
    "is_live",
    "recorded_by_proxy",
    "set_custom_default_matcher",
]


class LocalCredential:
    """A token credential for the local endpoints (they accept any token)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("local-token", int(time.time()) + 3600)

    def close(self) -> None:
        return None

    def __enter__(self) -> LocalCredential:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class AsyncLocalCredential:
    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("local-token", int(time.time()) + 3600)

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> AsyncLocalCredential:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def get_credential(is_async: bool = False, **kwargs: Any) -> Any:
    return AsyncLocalCredential() if is_async else LocalCredential()


class AzureRecordedTestCase:
    def get_resource_name(self, name: str) -> str:
        return name

    def create_random_name(self, name: str) -> str:
        return f"{name}{uuid.uuid4().hex[:8]}"

    @staticmethod
    def await_prepared_test(fn: Callable[..., Any]) -> Callable[..., Any]:
        """The legacy decorator that ran an async test in its own loop: pytest-asyncio runs
        it here (asyncio_mode=auto)."""
        return fn


class AzureMgmtRecordedTestCase(AzureRecordedTestCase):
    pass


class FakeResource:
    def __init__(self, name: str, id: str) -> None:
        self.name = name
        self.id = id


def set_custom_default_matcher(**kwargs: Any) -> None:
    return None


def recorded_by_proxy(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


class AzureMgmtPreparer:
    """Base of the preparers: creates a resource, passes it to the test as keyword
    arguments, removes it after. Subclasses implement ``create_resource`` / ``remove_resource``."""

    def __init__(self, name_prefix: str = "", random_name_length: int = 24, **kwargs: Any) -> None:
        self.name_prefix = name_prefix
        self.is_live = True

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return {}

    def remove_resource(self, name: str, **kwargs: Any) -> None:
        return None

    def _name(self) -> str:
        return f"{self.name_prefix or 'r'}{uuid.uuid4().hex[:10]}".replace("_", "-").lower()

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                name = self._name()
                kwargs.update(self.create_resource(name, **kwargs))
                try:
                    return await fn(*args, **kwargs)
                finally:
                    self.remove_resource(name, **kwargs)

            return run_async

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            name = self._name()
            kwargs.update(self.create_resource(name, **kwargs))
            try:
                return fn(*args, **kwargs)
            finally:
                self.remove_resource(name, **kwargs)

        return run


class _PassThroughPreparer(AzureMgmtPreparer):
    def __init__(
        self, *args: Any, parameter_name: str = RESOURCE_GROUP_PARAM, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.parameter_name = parameter_name

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return {self.parameter_name: FakeResource(name=name, id=name)}


RandomNameResourceGroupPreparer = _PassThroughPreparer
CachedResourceGroupPreparer = _PassThroughPreparer


def PowerShellPreparer(*args: Any, **kwargs: Any) -> Callable[..., Any]:  # noqa: N802
    return lambda fn: fn
