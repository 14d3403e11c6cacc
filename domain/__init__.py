"""The contact domain: the Contact aggregate, its value objects and its events.

Imports only the standard library and pydantic (tests/unit/test_layering.py proves it).
"""
