"""The base of every value the core answers with as a model (the relay's health and backlog
readings, scheduled events' states, the operators' results) and of the HTTP layer's request and
view models (`cosmos_outbox.http.Model` is this one): frozen, no field it does not declare,
camelCase on the wire. Below the relay and the HTTP layer both, so that reading the relay's
health does not load the HTTP framework."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    # defer_build: each model's validator and serializer are built on its first use, not at
    # import (a Functions worker's start defines about 100 models and uses a few).
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        json_schema_serialization_defaults_required=True,
        defer_build=True,
    )


M = TypeVar("M", bound=BaseModel)


def of_attributes(model: type[M], source: object, **given: Any) -> M:
    """A `model` of `source`: each field its attribute of the same name, but the fields
    `given` here (a result typed once, not copied into the model field by field)."""
    values = {name: getattr(source, name) for name in model.model_fields if name not in given}
    return model.model_validate({**values, **given})
