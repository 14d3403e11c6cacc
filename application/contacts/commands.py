"""The contact commands: request bodies, built from the domain's constrained types, so one set
of limits validates both. The OpenAPI document is generated from these.

`PatchContact` names every aspect a client may change; the reference sample's one-aspect routes
(`POST /contacts/{id}/update-<aspect>`) take bodies derived from it (`update_body`), so an aspect
is declared once and every route that changes it reads that declaration."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, create_model, model_validator

from cosmos_outbox.http import RequestModel, omit_null_defaults
from domain.values import Company, CompanyName, Description, EmailAddress, Name, PersonName


class CreateContact(RequestModel):
    """Body of POST /contacts: either `companyName` or a full `company`."""

    model_config = ConfigDict(
        json_schema_extra=omit_null_defaults(
            {"oneOf": [{"required": ["companyName"]}, {"required": ["company"]}]}
        )
    )

    first_name: PersonName
    last_name: PersonName
    email: EmailAddress
    description: Description = ""
    company_name: CompanyName | None = None
    company: Company | None = None

    @model_validator(mode="after")
    def _one_company(self) -> CreateContact:
        if (self.company_name is None) == (self.company is None):
            raise ValueError("send exactly one of companyName or company")
        return self

    def fields(self) -> dict[str, Any]:
        """The new contact's fields, as `Contact.create` takes them."""
        company = (
            self.company
            if self.company is not None
            else Company(company_name=self.company_name or "")
        )
        return {
            "name": Name(first_name=self.first_name, last_name=self.last_name),
            "email": self.email,
            "description": self.description,
            "company": company,
        }


class PatchContact(RequestModel):
    """Body of PATCH /contacts/{id}: any of the aspects; each changed one raises one event."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults({"minProperties": 1}))

    name: Name | None = None
    email: EmailAddress | None = None
    description: Description | None = None
    company: Company | None = None

    @model_validator(mode="after")
    def _something(self) -> Self:
        if not self.model_fields_set:
            raise ValueError(f"send at least one of {', '.join(type(self).model_fields)}")
        return self

    def changes(self) -> dict[str, Any]:
        """The aspects sent, as `Contact.change` takes them."""
        return {name: getattr(self, name) for name in self.model_fields_set}


def update_body(aspect: str) -> type[BaseModel]:
    """The body of `POST /contacts/{id}/update-<aspect>` (the reference sample's routes): the
    aspect's own model when it is an object (`UpdateName` is a Name), else an object with the
    one field (`UpdateEmail` is `{email}`); named `Update<Aspect>` in the OpenAPI document."""
    name = f"Update{aspect[:1].upper()}{aspect[1:]}"
    kind = _object_model(aspect)
    if kind is not None:
        return create_model(
            name,
            __base__=kind,
            __module__=__name__,
            __doc__=f"Body of POST /contacts/{{id}}/update-{aspect}.",
        )
    annotation = next(a for a in _branches(aspect) if a is not type(None))
    fields: dict[str, Any] = {aspect: (annotation, ...)}
    return create_model(name, __base__=RequestModel, __module__=__name__, **fields)


def patch_of(aspect: str, body: BaseModel) -> PatchContact:
    """The PATCH an `update-<aspect>` body stands for (a one-aspect change)."""
    kind = _object_model(aspect)
    value = kind.model_validate(body.model_dump()) if kind else getattr(body, aspect)
    return PatchContact.model_validate({aspect: value}, by_name=True)


def _object_model(aspect: str) -> type[BaseModel] | None:
    return next(
        (a for a in _branches(aspect) if isinstance(a, type) and issubclass(a, BaseModel)), None
    )


def _branches(aspect: str) -> tuple[Any, ...]:
    annotation = PatchContact.model_fields[aspect].annotation
    return tuple(getattr(annotation, "__args__", ())) or (annotation,)
