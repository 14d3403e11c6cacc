"""Value objects of a contact, with the field limits of the reference sample.

The constrained string types are the single source of the limits: the HTTP request models in
`application.commands` are built from them, so API validation and domain validation cannot drift.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, TypeAdapter
from pydantic.alias_generators import to_camel

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = re.compile(rf"[^@\s]{{1,64}}@{_LABEL}(?:\.{_LABEL})+")


def _check_email(value: str) -> str:
    if not _EMAIL.fullmatch(value):
        raise ValueError("not a valid email address")
    local, _, domain = value.rpartition("@")
    return f"{local}@{domain.lower()}"


PersonName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
EmailAddress = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=3, max_length=254),
    AfterValidator(_check_email),
]
Description = Annotated[str, StringConstraints(strip_whitespace=True, max_length=500)]
CompanyName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=250)]
Street = Annotated[str, StringConstraints(strip_whitespace=True, max_length=250)]
HouseNumber = Annotated[str, StringConstraints(strip_whitespace=True, max_length=10)]
PostalCode = Annotated[str, StringConstraints(strip_whitespace=True, max_length=25)]
City = Annotated[str, StringConstraints(strip_whitespace=True, max_length=100)]
Country = Annotated[str, StringConstraints(strip_whitespace=True, max_length=100)]


EMAIL: TypeAdapter[str] = TypeAdapter(EmailAddress)
DESCRIPTION: TypeAdapter[str] = TypeAdapter(Description)


class ValueObject(BaseModel):
    """Immutable, compared by value, camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
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
