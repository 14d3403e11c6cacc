"""The HTTP layer every blueprint shares: operations declared once (`operations`), the route
helper (`resources`: an aggregate's create / read / change routes in a few lines), request
parsing that holds under hostile input (`requests`), problem responses (`problems`), paging
tokens (`paging`), conditional requests (`conditional`, RFC 9110 §13), the request and response
model bases (`models`), the route table and fallback (`routing`) and the OpenAPI document
(`openapi`), all read from the declarations."""

from __future__ import annotations

from cosmos_outbox.http._operations import (
    HttpApi,
    HttpCall,
    HttpOperation,
    PathParameter,
    QueryParameter,
    Reply,
    ResponseHeader,
    operation_of,
)
from cosmos_outbox.http._problems import HttpProblemError
from cosmos_outbox.http._routing import FunctionApp

__all__ = [
    "FunctionApp",
    "HttpApi",
    "HttpCall",
    "HttpOperation",
    "HttpProblemError",
    "PathParameter",
    "QueryParameter",
    "Reply",
    "ResponseHeader",
    "operation_of",
]
