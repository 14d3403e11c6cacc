"""Value objects of a contact, with the field limits of the reference sample.

The constrained string types are the single source of the limits: the HTTP request models in
`application.contacts.commands` are built from them, so API validation and domain validation
cannot drift.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any

import pydantic.networks
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    GetJsonSchemaHandler,
    StringConstraints,
    TypeAdapter,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic.networks import import_email_validator, validate_email

from cosmos_outbox.aggregates import Text

#: The text rules, for a value checked before it is typed (the length is the type's).
_TEXT_RULES = Text(max_length=254, required=False)


@functools.lru_cache(maxsize=4096)
def _check_email(value: str) -> str:
    """RFC 5321 addresses only: ASCII, no display name, no quoted local part, no IP literal;
    checked by email-validator (through pydantic), the domain lowercased. A pure function of
    the value, kept for the last addresses checked: a create checks its address in the request
    body and again in the contact it makes (email-validator is a third of the app's own time in
    a request: docs/benchmarks.md); a refused value is checked again each time."""
    value = _TEXT_RULES(value)  # ValueError naming the rule; trimmed
    if not value.isascii():
        raise ValueError(
            "internationalised addresses are not accepted: use ASCII, with the domain in its "
            "xn-- (punycode) form"
        )
    if "<" in value or ">" in value or " " in value:
        raise ValueError("not a valid email address: send the bare address, without a name")
    _, normalized = validate_email(value)
    return normalized


def _special_use_pattern() -> str:
    """Addresses in the special-use domains email-validator refuses (RFC 6761: .test, .local,
    .invalid, ...), as a pattern for the schema's `not`: its own list, so the two agree."""
    import_email_validator()
    names: list[str] = list(vars(pydantic.networks)["email_validator"].SPECIAL_USE_DOMAIN_NAMES)
    either = "|".join(
        "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in name)
        for name in sorted(names)
    )
    return rf"[@.](?:{either})\.?$"


class _EmailSchema:
    @staticmethod
    def __get_pydantic_json_schema__(
        core_schema: Any, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema["format"] = "email"
        schema["not"] = {"pattern": _special_use_pattern()}
        return schema


PersonName = Annotated[str, Text(max_length=100)]
EmailAddress = Annotated[
    str, StringConstraints(max_length=254), AfterValidator(_check_email), _EmailSchema
]
Description = Annotated[str, Text(max_length=500, required=False)]
CompanyName = Annotated[str, Text(max_length=250)]
Street = Annotated[str, Text(max_length=250, required=False)]
HouseNumber = Annotated[str, Text(max_length=10, required=False)]
PostalCode = Annotated[str, Text(max_length=25, required=False)]
City = Annotated[str, Text(max_length=100, required=False)]
Country = Annotated[str, Text(max_length=100, required=False)]


EMAIL: TypeAdapter[str] = TypeAdapter(EmailAddress)
DESCRIPTION: TypeAdapter[str] = TypeAdapter(Description)


class ValueObject(BaseModel):
    """Immutable, compared by value, camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        defer_build=True,
    )


class Name(ValueObject):
    first_name: PersonName
    last_name: PersonName

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"


class Company(ValueObject):
    company_name: CompanyName
    street: Street = ""
    house_number: HouseNumber = ""
    postal_code: PostalCode = ""
    city: City = ""
    country: Country = ""
