"""The operators' models of the Contacts app: cosmos-outbox-operators', with the `contactId`
alias this app's operators and their scripts know. In a re-drive request `contactId` stands for
`aggregateType: "contact"` + `aggregateId`; in a quarantine item it is the aggregate id when
the aggregate is a contact (null otherwise)."""

from __future__ import annotations

from typing import Self

from pydantic import ConfigDict, Field, model_validator

import cosmos_outbox_operators as operators
from cosmos_outbox.http import Identifier, omit_null_defaults
from cosmos_outbox.operations import QuarantinedEvent
from domain.contact import Contact

#: The aggregate type `contactId` stands for.
CONTACT = Contact.aggregate_type


#: The cross-field rules of a re-drive's body (`contactId` among them), in its schema.
CONFIG = ConfigDict(
    json_schema_extra=omit_null_defaults(
        {
            "dependentRequired": {"aggregateId": ["aggregateType"]},
            "dependentSchemas": {
                "contactId": {
                    "properties": {"aggregateType": {"const": CONTACT}},
                    "not": {"required": ["aggregateId"]},
                }
            },
        }
    )
)


class RedriveScope(operators.RedriveScope):
    """Body of POST /outbox/redrive/operation (and the base of POST /outbox/redrive's): `since`
    (RFC 3339 with offset); optionally one aggregate type, and one aggregate of it
    (`aggregateId`, which needs `aggregateType`); `contactId` is this app's alias of
    `aggregateType: "contact"` + `aggregateId`."""

    model_config = CONFIG

    contact_id: Identifier | None = Field(
        default=None, description="Alias of aggregateType contact + aggregateId"
    )

    @model_validator(mode="before")
    @classmethod
    def _alias_checked_first(cls, data: object) -> object:
        """`contactId` with `aggregateId` is refused before the base's rule (aggregateId
        needs aggregateType) can name the wrong fault."""
        if (
            isinstance(data, dict)
            and data.get("contactId") is not None
            and data.get("aggregateId") is not None
        ):
            raise ValueError("send contactId or aggregateId, not both")
        return data

    @model_validator(mode="after")
    def _a_contact(self) -> Self:
        if self.contact_id is not None and self.aggregate_type not in (None, CONTACT):
            raise ValueError("contactId names a contact: aggregateType must be contact")
        return self

    @property
    def scope(self) -> tuple[str | None, str | None]:
        """(aggregate type, aggregate id) to re-drive, `contactId` resolved."""
        if self.contact_id is not None:
            return CONTACT, self.contact_id
        return super().scope


class RedriveRequest(RedriveScope, operators.RedriveRequest):
    """Body of POST /outbox/redrive (one page per request): a `RedriveScope` (`contactId` its
    alias), `pageSize` and the previous page's `continuationToken`."""

    model_config = CONFIG


class QuarantineItem(operators.QuarantineItem):
    contact_id: str | None = Field(
        description="Alias of aggregateId when the aggregate is a contact, else null"
    )

    @classmethod
    def fields_of(cls, entry: QuarantinedEvent) -> dict[str, object]:
        return {
            **super().fields_of(entry),
            "contact_id": entry.aggregate_id if entry.aggregate_type in (CONTACT, None) else None,
        }


class QuarantineListPage(operators.QuarantineListPage):
    items: list[QuarantineItem]  # type: ignore[assignment]  # the app's items


MODELS = operators.OperatorModels(
    redrive_request=RedriveRequest,
    redrive_scope=RedriveScope,
    quarantine_item=QuarantineItem,
    quarantine_page=QuarantineListPage,
)
