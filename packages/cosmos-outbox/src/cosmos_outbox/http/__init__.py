"""The HTTP layer every app on the outbox shares: operations declared once (`HttpApi.operation`:
route, method, auth level, models, status, headers, errors), the request pipeline that holds
under hostile input (problem documents, RFC 9457), conditional requests (RFC 9110 §13), sealed
paging tokens, the request and view model bases, and the route helper (`AggregateRoutes`: an
aggregate's create, read and change routes in a few lines each). The 404/405 fallback and the
OpenAPI document are read from the declarations."""

from __future__ import annotations

from cosmos_outbox.http._api import HttpApi
from cosmos_outbox.http._call import HttpCall, Reply
from cosmos_outbox.http._declaration import (
    HttpOperation,
    PathParameter,
    QueryParameter,
    ResponseHeader,
    operation_of,
)
from cosmos_outbox.http._models import (
    Identifier,
    Model,
    PageView,
    RequestModel,
    View,
    omit_null_defaults,
    view_of,
)
from cosmos_outbox.http._paging import Cursor, TokenCodec, next_token
from cosmos_outbox.http._problems import HttpProblemError
from cosmos_outbox.http._routes import AggregateRoutes

__all__ = [
    "AggregateRoutes",
    "Cursor",
    "HttpApi",
    "HttpCall",
    "HttpOperation",
    "HttpProblemError",
    "Identifier",
    "Model",
    "PageView",
    "PathParameter",
    "QueryParameter",
    "Reply",
    "RequestModel",
    "ResponseHeader",
    "TokenCodec",
    "View",
    "next_token",
    "omit_null_defaults",
    "operation_of",
    "view_of",
]
