"""The HTTP layer every app on the outbox shares: operations declared once (`HttpApi.operation`:
route, method, auth level, models, status, headers, errors), the request pipeline that holds
under hostile input (problem documents, RFC 9457), conditional requests (RFC 9110 §13), sealed
paging tokens, the request and view model bases, and the route helper (`AggregateRoutes`: an
aggregate's create, read and change routes in a few lines each). The 404/405 fallback and the
OpenAPI document are read from the declarations; an app's route table (`http_routes`: its
`HttpRoute`s) is read from its indexed functions, as the host matches requests to them."""

from __future__ import annotations

from cosmos_outbox.http._aggregate_routes import AggregateRoutes
from cosmos_outbox.http._api import HttpApi
from cosmos_outbox.http._call import HttpCall, Reply
from cosmos_outbox.http._callers import SignInTrust, is_local_host, sign_in_trust
from cosmos_outbox.http._conditional import TAG_LIST_PATTERN
from cosmos_outbox.http._declaration import (
    DEFAULT_PAGE_SIZE,
    KEY_PARAMETER,
    MAX_PAGE_SIZE,
    PAGE_ATTRIBUTE,
    Command,
    HttpOperation,
    PathParameter,
    QueryParameter,
    ResponseHeader,
    is_page,
    operation_of,
)
from cosmos_outbox.http._idempotency_key import KEY_PATTERN, parse_key
from cosmos_outbox.http._models import (
    ID_PATTERN,
    Identifier,
    Model,
    PageView,
    RequestModel,
    View,
    omit_null_defaults,
    view_of,
)
from cosmos_outbox.http._paging import TOKEN_PATTERN, Cursor, TokenCodec, next_token
from cosmos_outbox.http._problems import HttpProblemError
from cosmos_outbox.http._requests import MAX_DEPTH, parse_body, parse_json
from cosmos_outbox.http._routing import HttpRoute, http_routes

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "ID_PATTERN",
    "KEY_PARAMETER",
    "KEY_PATTERN",
    "MAX_DEPTH",
    "MAX_PAGE_SIZE",
    "PAGE_ATTRIBUTE",
    "TAG_LIST_PATTERN",
    "TOKEN_PATTERN",
    "AggregateRoutes",
    "Command",
    "Cursor",
    "HttpApi",
    "HttpCall",
    "HttpOperation",
    "HttpProblemError",
    "HttpRoute",
    "Identifier",
    "Model",
    "PageView",
    "PathParameter",
    "QueryParameter",
    "Reply",
    "RequestModel",
    "ResponseHeader",
    "SignInTrust",
    "TokenCodec",
    "View",
    "http_routes",
    "is_local_host",
    "is_page",
    "next_token",
    "omit_null_defaults",
    "operation_of",
    "parse_body",
    "parse_json",
    "parse_key",
    "sign_in_trust",
    "view_of",
]
