"""Request and response models of the contact use cases. Built from the domain's constrained
types, so one set of limits validates both; the OpenAPI document is generated from these. The
contact as returned (`ContactView`) is derived from the Contact model itself: a field added to
the contact appears in the API without being listed here."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, create_model, field_validator, model_validator
from pydantic.alias_generators import to_camel

from application.ports import ContactSummary, Page
from domain.contact import Contact
from domain.values import Company, CompanyName, Description, EmailAddress, Name, PersonName


class Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True,
        json_schema_serialization_defaults_required=True,
    )


class View(Model):
    """A read model derived from another model (`view_of`)."""

    @classmethod
    def of(cls, source: BaseModel) -> Self:
        """This view of `source`: the fields of `source` that the view has, by name."""
        return cls.model_validate(source.model_dump(include=set(cls.model_fields)))


def view_of(model: type[BaseModel], *, name: str, hidden: set[str]) -> type[View]:
    """A read model with every field of `model` except `hidden`, with their types and limits."""
    unknown = hidden - set(model.model_fields)
    if unknown:
        raise ValueError(f"{model.__name__} has no fields {sorted(unknown)}")
    fields: dict[str, Any] = {
        field: (info.annotation, info)
        for field, info in model.model_fields.items()
        if field not in hidden
    }
    return create_model(name, __base__=View, __module__=__name__, **fields)


def _omit_null_defaults(extra: dict[str, Any]) -> Any:
    """JSON-schema hook: optional fields are neither nullable nor `default: null` (null is not
    accepted, see RequestModel), and the cross-field rules of the model are added as `extra`."""

    def edit(schema: dict[str, Any]) -> None:
        for name, prop in schema.get("properties", {}).items():
            if "default" in prop and prop["default"] is None:
                del prop["default"]
            branches = prop.get("anyOf", [])
            if {"type": "null"} in branches:
                rest = [b for b in branches if b != {"type": "null"}]
                prop.pop("anyOf")
                schema["properties"][name] = {**rest[0], **prop} if len(rest) == 1 else {
                    **prop, "anyOf": rest}
        schema.update(extra)

    return edit


class RequestModel(Model):
    """A request body. Optional fields are left out, never sent as null (the schema says so
    too: their types have no null)."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must not be null; leave the field out instead")
        return value


class CreateContact(RequestModel):
    """Body of POST /contacts: either `companyName` or a full `company`."""

    model_config = ConfigDict(json_schema_extra=_omit_null_defaults(
        {"oneOf": [{"required": ["companyName"]}, {"required": ["company"]}]}
    ))

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

    def to_company(self) -> Company:
        if self.company is not None:
            return self.company
        assert self.company_name is not None
        return Company(company_name=self.company_name)


class PatchContact(RequestModel):
    """Body of PATCH /contacts/{id}: any of the aspects; each changed one raises one event."""

    model_config = ConfigDict(json_schema_extra=_omit_null_defaults({"minProperties": 1}))

    name: Name | None = None
    email: EmailAddress | None = None
    description: Description | None = None
    company: Company | None = None

    @model_validator(mode="after")
    def _something(self) -> PatchContact:
        if not self.model_fields_set:
            raise ValueError("send at least one of name, email, description, company")
        return self


class UpdateName(Name):
    """Body of POST /contacts/{id}/update-name."""


class UpdateEmail(RequestModel):
    email: EmailAddress


class UpdateDescription(RequestModel):
    description: Description


class UpdateCompany(Company):
    """Body of POST /contacts/{id}/update-company."""


ContactView = view_of(Contact, name="ContactView", hidden={"deleted", "deleted_at"})
"""A contact as returned: every field of the contact but its deletion marks."""


class ContactListItem(Model):
    id: str
    email: str
    full_name: str
    company_name: str

    @classmethod
    def of(cls, summary: ContactSummary) -> ContactListItem:
        return cls(
            id=summary.id,
            email=summary.email,
            full_name=summary.full_name,
            company_name=summary.company_name,
        )


class ContactPage(Model):
    items: list[ContactListItem]
    continuation_token: str | None
    has_more: bool

    @classmethod
    def of(cls, page: Page) -> ContactPage:
        return cls(
            items=[ContactListItem.of(s) for s in page.items],
            continuation_token=page.continuation_token,
            has_more=page.continuation_token is not None,
        )
