"""The bases of the API's request and response models (`Model` is the core's:
`cosmos_outbox._model`), and the identifier rule of every id in a route or a body. Built from
the domain's constrained types where there is one, so one set of limits validates both; the
OpenAPI document is generated from these models."""

from __future__ import annotations

from typing import Annotated, Any, Self, cast

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from cosmos_outbox._model import Model as Model

#: An aggregate or event id in a route or a body (also the OpenAPI pattern).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
ID_MAX_LENGTH = 128
Identifier = Annotated[str, Field(pattern=ID_PATTERN, max_length=ID_MAX_LENGTH)]


class PageView(Model):
    """One page of a listing as answered: the items, the API's token of the next page, and
    whether there is one. A listing's page names the type of its items (`items: list[X]`)."""

    items: list[Any]
    continuation_token: str | None
    has_more: bool

    @classmethod
    def of_items(cls, items: list[Any], token: str | None) -> Self:
        return cls(items=items, continuation_token=token, has_more=token is not None)


class View(Model):
    """A read model derived from another model (`view_of`)."""

    @classmethod
    def of(cls, source: BaseModel) -> Self:
        """This view of `source`: the fields of `source` that the view has, by name. A view
        `view_of` made of `source`'s model takes its values as they are (they have the same
        types and limits, which `source` validated); any other is validated."""
        if _DERIVED.get(cls) is type(source):
            return cast(
                Self,
                cls.model_construct(**{name: getattr(source, name) for name in cls.model_fields}),
            )
        return cls.model_validate(source.model_dump(include=set(cls.model_fields)))


#: Each view `view_of` made, and the model it was made of.
_DERIVED: dict[type[View], type[BaseModel]] = {}


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
    view = create_model(name, __base__=View, __module__=model.__module__, **fields)
    _DERIVED[view] = model
    return view


def omit_null_defaults(extra: dict[str, Any]) -> Any:
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
                schema["properties"][name] = (
                    {**rest[0], **prop} if len(rest) == 1 else {**prop, "anyOf": rest}
                )
        # a property's rule is added to what its type says (`false`: the field left out)
        properties = schema.setdefault("properties", {})
        for name, rule in extra.get("properties", {}).items():
            known = properties.get(name)
            properties[name] = {**known, **rule} if isinstance(known, dict) and rule else rule
        # and a field it requires to those the model requires
        required = [*schema.get("required", [])]
        required += [name for name in extra.get("required", []) if name not in required]
        if required:
            schema["required"] = required
        schema.update({k: v for k, v in extra.items() if k not in ("properties", "required")})

    return edit


class RequestModel(Model):
    """A request body. Optional fields are left out, never sent as null (the schema says so
    too: their types have no null)."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults({}))

    @field_validator("*", mode="before")
    @classmethod
    def _no_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must not be null; leave the field out instead")
        return value

    def fields(self) -> dict[str, Any]:
        """Every field, by its Python name, as validated (nested models as they are): the
        keyword arguments of the aggregate's factory method (`Order.place(**body.fields())`)."""
        return {name: getattr(self, name) for name in type(self).model_fields}
