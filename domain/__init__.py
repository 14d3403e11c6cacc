"""The contact domain: the Contact aggregate, its value objects, its events and its errors.

Imports only the standard library, pydantic and the domain core of cosmos-outbox
(`cosmos_outbox._domain`, `cosmos_outbox._text`); tests/repository/test_layering.py proves it.
"""
