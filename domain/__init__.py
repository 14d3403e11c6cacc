"""The contact domain: the Contact aggregate, its events, its value objects and its errors.

Imports only the standard library, pydantic and cosmos-outbox's domain core (`Aggregate`,
`Event`, `DomainError`, `Text` from the package root); tests/repository/test_layering.py proves
it.
"""
