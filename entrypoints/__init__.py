"""Entrypoint helpers for function_app.py: HTTP parsing and problem responses, the OpenAPI
document, the relay glue, and the composition root (bootstrap)."""
