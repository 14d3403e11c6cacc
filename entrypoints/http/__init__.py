"""The HTTP plumbing every blueprint shares: operations declared once (`operations`), request
parsing that holds under hostile input (`requests`), problem responses (`problems`), paging
tokens (`paging`), the route table and fallback (`routing`) and the OpenAPI document
(`openapi`), all read from the declarations."""
