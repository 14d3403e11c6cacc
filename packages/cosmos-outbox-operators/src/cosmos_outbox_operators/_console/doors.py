"""The operators' routes through two doors, one implementation: each operation is declared once,
with one handler over one use case, and registered twice. **The admin key's door**,
`<prefix>/<route>`, at auth level ADMIN (the Functions host admits the master key, in the
`x-functions-key` header; `?code=` is refused here: a key in a URL ends in logs and histories),
answers JSON. **The signed-in door**, `<prefix>/console/<route>`, at auth level ANONYMOUS for the
host, admits here a signed-in operator with the operator role (`identity`), their actions
guarded against cross-site requests (`guard`), and answers JSON or, for the page, the same
answer as an HTML fragment (`negotiation`). Why two doors (the host grants auth levels to keys
alone, and the master key never reaches the app): the package README, "The console"; who each
admits: docs/operating-the-outbox.md, "Who may act". Both run the same function body and differ
only in who they admit; every action runs `acting_as` the operator admitted, and its audit line
names them (`cosmos_outbox.operations.acting_as`)."""

from __future__ import annotations

import functools
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import azure.functions as func

from cosmos_outbox.http import (
    KEY_PARAMETER,
    HttpApi,
    HttpOperation,
    HttpProblemError,
    PathParameter,
    is_local_host,
)
from cosmos_outbox.http.bounded import BOUND_SECONDS
from cosmos_outbox.operations import ADMIN_KEY, NO_KEY, Actor, acting_as
from cosmos_outbox_operators._console.guard import (
    CrossSiteError,
    check_action,
    check_local_host,
    check_same_site,
)
from cosmos_outbox_operators._console.identity import (
    OPERATOR_ROLE,
    PRINCIPAL_HEADER,
    SignInTrust,
    bearer_validated,
    principal_of,
    sign_in_trust,
)
from cosmos_outbox_operators._console.negotiation import negotiated

__all__ = [
    "CONSOLE_SEGMENT",
    "OperatorDoors",
    "RefusedError",
    "admit_signed_in",
    "console_route",
    "login_path",
]

logger = logging.getLogger("cosmos_outbox.operators")

#: The route segment of the signed-in door, after the operators' prefix.
CONSOLE_SEGMENT = "console"
#: Statuses the signed-in door adds to every operation's (no one signed in; not an operator,
#: or a cross-site action).
_DOOR_ERRORS = (401, 403)

Function = Callable[..., func.HttpResponse | Awaitable[func.HttpResponse]]


class RefusedError(HttpProblemError):
    """A request the signed-in door does not admit (401: no one signed in; 403: signed in
    without the operator role, or an action from another site)."""


def console_route(prefix: str, route: str) -> str:
    """The signed-in door's route of the key door's `route` (under `prefix`)."""
    head = f"{prefix}/"
    if not route.startswith(head):
        raise ValueError(f"operators' route {route!r} is not under {prefix!r}")
    return f"{prefix}/{CONSOLE_SEGMENT}/{route.removeprefix(head)}"


def login_path(return_to: str) -> str:
    """App Service Authentication's sign-in with Entra ID, back to `return_to` afterwards (a
    path of this app: the platform refuses other hosts unless allowed)."""
    from urllib.parse import quote

    return f"/.auth/login/aad?post_login_redirect_uri={quote(return_to, safe='/')}"


def admit_signed_in(
    headers: Mapping[str, str],
    *,
    role: str = OPERATOR_ROLE,
    return_to: str = "/",
    trust: SignInTrust | None = None,
) -> Actor:
    """The operator a request through the signed-in door is from, or `RefusedError`. A principal
    header where none is believed (`identity.sign_in_trust`) is refused and logged, never acted
    on."""
    trust = sign_in_trust() if trust is None else trust
    if not trust.trusted:
        if headers.get(PRINCIPAL_HEADER):
            logger.warning(
                "operators' console refused a principal it cannot believe here: %s", trust.why
            )
        raise RefusedError(
            401,
            "Unauthorized",
            f"no one can be signed in here: {trust.why}. Enable App Service Authentication with "
            "the operator role (the package README, 'The operators' console'), or call the "
            "operators' routes without /console with the admin key in the x-functions-key header",
            headers={"WWW-Authenticate": 'Bearer realm="outbox-operators"'},
        )
    principal = principal_of(headers)
    if principal is None:
        raise RefusedError(
            401,
            "Unauthorized",
            f"sign in first: {login_path(return_to)}",
            headers={"WWW-Authenticate": 'Bearer realm="outbox-operators"'},
        )
    if role not in principal.roles:
        logger.warning(
            "operators' console refused %s (id %s): no role %s",
            principal.name,
            principal.id,
            role,
            extra={"outbox.actor_name": principal.name, "outbox.actor_id": principal.id},
        )
        raise RefusedError(
            403,
            "Forbidden",
            f"you are signed in as {principal.name}, without the app role {role}: ask an owner "
            "of the app's Entra ID registration to assign it to you",
        )
    return Actor("signed-in operator", name=principal.name, id=principal.id)


def _no_key_in_url(req: func.HttpRequest) -> None:
    if KEY_PARAMETER in req.params:
        raise HttpProblemError(
            400,
            "Bad Request",
            "send the key in the x-functions-key header, never in the URL (?code=): a URL is "
            "written to logs and histories",
        )


def _door(
    function: Function,
    admit: Callable[[func.HttpRequest], Actor | func.HttpResponse],
    answer: Callable[[func.HttpRequest, func.HttpResponse], func.HttpResponse] | None = None,
) -> Function:
    """`function` run `acting_as` whom `admit` admits (its refusal answered as it is), its
    response through `answer`; a function of `function`'s kind (`async def` when it is), with
    its parameters (the worker binds them by name)."""
    given = answer or (lambda req, response: response)

    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def serve(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
            actor = admit(req)
            if isinstance(actor, func.HttpResponse):
                return actor
            with acting_as(actor):
                response = await cast(Awaitable[func.HttpResponse], function(req, context))
            return given(req, response)

        return serve

    @functools.wraps(function)
    def run(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
        actor = admit(req)
        if isinstance(actor, func.HttpResponse):
            return actor
        with acting_as(actor):
            response = cast(func.HttpResponse, function(req, context))
        return given(req, response)

    return run


#: The header the admin key travels in (the host reads it; it reaches the app too).
KEY_HEADER = "x-functions-key"
#: funcstack's word to its workers that its host checks keys (`funcstack run --enforce-keys`;
#: the host sets it, "true" or "false", whatever the settings say).
KEYS_ENFORCED_SETTING = "FUNCSTACK_KEYS_ENFORCED"
#: A key was sent to a host that checked none (audited as such: not as "admin key", which any
#: text would have passed for).
SENT_UNCHECKED = Actor("nobody", name="keys not enforced locally (a key was sent, not checked)")


def keys_checked(environment: Mapping[str, str] | None = None) -> bool:
    """Whether the host checked the key a request sent: in Azure (not a local host) the host
    admits an ADMIN route's request only with the master key; a local host checks none unless it
    says it does (funcstack's `--enforce-keys`: `FUNCSTACK_KEYS_ENFORCED=true`; Core Tools says
    nothing, so its keys count as not checked)."""
    env = os.environ if environment is None else environment
    if not is_local_host(env):
        return True
    return env.get(KEYS_ENFORCED_SETTING, "").strip().lower() == "true"


def key_actor(req: func.HttpRequest) -> Actor:
    """Who acts through the admin key's door, as it actually was: the key's holder when a key
    was sent and the host checked it (`keys_checked`); nobody when none was sent (a host that
    admitted a request without a key enforces none) or when the host checked none."""
    if not req.headers.get(KEY_HEADER):
        return NO_KEY
    return ADMIN_KEY if keys_checked() else SENT_UNCHECKED


def key_door(
    operation: HttpOperation, function: Function, *, actor: Actor | None = None
) -> Function:
    """The admin key's door: the host checked the key; refuse it in the URL and an action from
    another site (whether or not keys are enforced: `guard.check_same_site`), act as who sent
    it (`key_actor`), or as `actor` when the routes are served in-process to one (the command
    line on the stores: no host, no key)."""

    def admit(req: func.HttpRequest) -> Actor | func.HttpResponse:
        try:
            _no_key_in_url(req)
            check_local_host(req.method, req.headers)  # reads too: a rebinding page reads bodies
            check_same_site(req.method, req.headers)
        except CrossSiteError as exc:
            logger.warning("operators' routes refused an action: %s", exc)
            return RefusedError(403, "Forbidden", str(exc)).response()
        except HttpProblemError as exc:
            return exc.response()
        return actor if actor is not None else key_actor(req)

    return _door(function, admit)


def console_base(req: func.HttpRequest, prefix: str) -> str:
    """The console's path in `req`'s URL: `/<host's route prefix>/<prefix>/console`."""
    from urllib.parse import urlsplit

    path = urlsplit(req.url).path
    mark = f"/{prefix}/{CONSOLE_SEGMENT}"
    at = path.find(f"{mark}/")
    if at < 0:
        at = path.rfind(mark) if path.endswith(mark) else -1
    return path[: at + len(mark)] if at >= 0 else f"/api{mark}"


def signed_in_door(role: str, prefix: str) -> Callable[[HttpOperation, Function], Function]:
    """The signed-in door: admit an operator with `role`, guard actions, act as them, answer in
    the form asked for."""

    def wrap(operation: HttpOperation, function: Function) -> Function:
        name = operation.name.removeprefix(f"{CONSOLE_SEGMENT}_")

        def answer(req: func.HttpRequest, response: func.HttpResponse) -> func.HttpResponse:
            base = console_base(req, prefix)
            return negotiated(req, name, response, base=base, answers=operation.response)

        def admitted(req: func.HttpRequest) -> Actor | func.HttpResponse:
            try:
                _no_key_in_url(req)
                check_local_host(req.method, req.headers)  # reads too: a rebinding page reads
                trust = sign_in_trust()
                actor = admit_signed_in(
                    req.headers, role=role, return_to=console_base(req, prefix), trust=trust
                )
                check_action(
                    req.method, req.headers, bearer_validated=bearer_validated(req.headers, trust)
                )
            except CrossSiteError as exc:
                logger.warning("operators' console refused an action: %s", exc)
                return answer(req, RefusedError(403, "Forbidden", str(exc)).response())
            except HttpProblemError as exc:
                return answer(req, exc.response())
            return actor

        return _door(function, admitted, answer)

    return wrap


class OperatorDoors:
    """The operators' operations on one blueprint, each through both doors (`console=False`:
    the admin key's only; `actor`: served in-process to that actor, through no door), bounded
    by `bound_seconds`. `operation(...)` takes `HttpApi.operation`'s declaration; the route
    is the key door's, under `prefix`."""

    def __init__(
        self,
        *,
        prefix: str,
        parameters: Mapping[str, PathParameter],
        auth_level: func.AuthLevel,
        console: bool,
        role: str = OPERATOR_ROLE,
        actor: Actor | None = None,
        bound_seconds: float = BOUND_SECONDS,
    ) -> None:
        self.prefix = prefix
        self.key = HttpApi(
            parameters=parameters,
            auth_level=auth_level,
            bounded=True,
            bound_seconds=bound_seconds,
            wrap=functools.partial(key_door, actor=actor) if actor is not None else key_door,
            security=("masterKey",) if auth_level == func.AuthLevel.ADMIN else None,
        )
        self.blueprint = self.key.blueprint
        self.signed_in = (
            HttpApi(
                self.blueprint,
                parameters=parameters,
                auth_level=func.AuthLevel.ANONYMOUS,
                bounded=True,
                bound_seconds=bound_seconds,
                wrap=signed_in_door(role, prefix),
                security=("signedInOperator",),
            )
            if console
            else None
        )
        self.role = role

    def operation(self, **declared: Any) -> Callable[[Any], Any]:
        def register(handler: Any) -> Any:
            self.key.operation(**declared)(handler)
            if self.signed_in is not None:
                name = declared.get("name") or handler.__name__
                self.signed_in.operation(
                    **{
                        **declared,
                        "route": console_route(self.prefix, declared["route"]),
                        "name": f"{CONSOLE_SEGMENT}_{name}",
                        "errors": tuple(sorted({*declared["errors"], *_DOOR_ERRORS})),
                    }
                )(handler)
            return handler

        return register
