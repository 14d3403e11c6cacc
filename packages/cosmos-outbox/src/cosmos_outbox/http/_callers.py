"""Whether the caller the platform names is believed here. App Service Authentication ("Easy
Auth") names the caller of every request it authenticated in headers of its own (the operators'
console reads the claims; the route helper's Idempotency-Key the `-IDP` and `-ID` ones), and

"External requests aren't allowed to set these headers, so they're present only if set by App
Service" -- while authentication is enabled on the app, which the platform says by setting the
environment variable `WEBSITE_AUTH_ENABLED=True` (the Functions host reads the same variable:
azure-functions-host, `EnvironmentSettingNames.EasyAuthEnabled`). But that variable is also an
ordinary app setting: anyone can set it where nothing strips a client's headers (a container, a
local host's settings file), and from it alone the app cannot tell. So a principal is believed
only when three things hold (`sign_in_trust`), and each refusal says which one failed:

1. **The app's owner says what signs callers in**, `OUTBOX_CONSOLE_SIGN_IN`:
   `app-service-authentication` (Azure App Service Authentication; the deployment that turns it
   on sets it: deploy/modules/functionapp.bicep) or `local-stand-in` (a local host's stand-in
   that strips client-sent headers as the platform does: funcstack's `FUNCSTACK_SIGN_IN=true`).
   Unset: no principal is believed, whatever else is set. A setting of our own, named for this
   one purpose, is not set by accident or copied from another app's environment listing.
2. **The platform says authentication is on**: `WEBSITE_AUTH_ENABLED=True`.
3. **The host is the one the owner named**: a local host -- Core Tools sets
   `FUNCTIONS_CORETOOLS_ENVIRONMENT=true` on its host and workers (azure-functions-core-tools
   `Program.cs`; the host's `EnvironmentSettingNames.CoreToolsEnvironment`), funcstack too --
   has no App Service Authentication: there `app-service-authentication` is refused, and
   `local-stand-in` is believed only there (a local setting copied to Azure opens nothing).

What remains trusted is the owner's word: `app-service-authentication` set where App Service
Authentication is off (or `local-stand-in` and `WEBSITE_AUTH_ENABLED` written into Core Tools'
local.settings.json, where nothing strips headers) would believe a forged header; the operating
guide says so (docs/operating-the-outbox.md, "Who may act"). The four headers always come
together from the platform, but a forger sends four as easily as one: their presence is not
checked, it would prove nothing.

Who reads it: the operators' console (`cosmos_outbox_operators`: a signed-in operator) and the
route helper's Idempotency-Key, scoped per caller only where the caller is believed
(`cosmos_outbox.http._idempotency_key`). The rule is the core's, one for both; signing in (the
claims, the roles, the session) stays with the console."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "APP_SERVICE_AUTHENTICATION",
    "AUTH_ENABLED_SETTING",
    "LOCAL_HOST_SETTING",
    "LOCAL_STAND_IN",
    "SIGN_IN_SETTING",
    "SignInTrust",
    "is_local_host",
    "sign_in_trust",
]

#: Set to "True" by App Service while its authentication is enabled on the app.
AUTH_ENABLED_SETTING = "WEBSITE_AUTH_ENABLED"
#: Set to "true" by Core Tools (and funcstack) on a local host and its workers.
LOCAL_HOST_SETTING = "FUNCTIONS_CORETOOLS_ENVIRONMENT"
#: The app's owner says what signs callers in (module docstring).
SIGN_IN_SETTING = "OUTBOX_CONSOLE_SIGN_IN"
APP_SERVICE_AUTHENTICATION = "app-service-authentication"
LOCAL_STAND_IN = "local-stand-in"


@dataclass(frozen=True)
class SignInTrust:
    """Whether a principal header is believed here, by what (`mode`), and if not, why (a
    sentence naming the setting to change)."""

    trusted: bool
    mode: str
    why: str = ""

    @property
    def by_app_service(self) -> bool:
        """Believed because Azure App Service Authentication is in front (it validates bearer
        tokens too; the local stand-in validates none)."""
        return self.trusted and self.mode == APP_SERVICE_AUTHENTICATION


def is_local_host(environment: Mapping[str, str] | None = None) -> bool:
    """Whether the app runs on a local Functions host (Core Tools, funcstack)."""
    return _true(os.environ if environment is None else environment, LOCAL_HOST_SETTING)


def _true(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() == "true"


def sign_in_trust(environment: Mapping[str, str] | None = None) -> SignInTrust:
    """The rule of the module docstring, read from `environment` (default: the process's)."""
    env = os.environ if environment is None else environment
    mode = env.get(SIGN_IN_SETTING, "").strip().lower()
    local = _true(env, LOCAL_HOST_SETTING)
    if not _true(env, AUTH_ENABLED_SETTING):
        return SignInTrust(
            False,
            mode,
            "App Service Authentication is not enabled on this app "
            f"({AUTH_ENABLED_SETTING} is not true)",
        )
    if mode == APP_SERVICE_AUTHENTICATION and local:
        return SignInTrust(
            False,
            mode,
            f"this is a local host ({LOCAL_HOST_SETTING}=true), which has no App Service "
            f"Authentication: anyone could send the principal header. Locally, sign in through "
            f"funcstack's stand-in (FUNCSTACK_SIGN_IN=true) with {SIGN_IN_SETTING}="
            f"{LOCAL_STAND_IN}",
        )
    if mode == LOCAL_STAND_IN and not local:
        return SignInTrust(
            False,
            mode,
            f"{SIGN_IN_SETTING}={LOCAL_STAND_IN} is a local host's setting, and this host is "
            f"not one ({LOCAL_HOST_SETTING} is not true): in Azure set "
            f"{SIGN_IN_SETTING}={APP_SERVICE_AUTHENTICATION}",
        )
    if mode in (APP_SERVICE_AUTHENTICATION, LOCAL_STAND_IN):
        return SignInTrust(True, mode)
    named = (
        f"{SIGN_IN_SETTING}={mode!r} names nothing known"
        if mode
        else f"{SIGN_IN_SETTING} is not set"
    )
    return SignInTrust(
        False,
        mode,
        f"{named}: {AUTH_ENABLED_SETTING}=True alone is an app setting anyone can set, so the "
        f"principal header is believed only where the app's owner says App Service "
        f"Authentication signs operators in ({SIGN_IN_SETTING}={APP_SERVICE_AUTHENTICATION}, "
        f"set by the deployment that enables it; {LOCAL_STAND_IN} under funcstack's sign-in)",
    )
