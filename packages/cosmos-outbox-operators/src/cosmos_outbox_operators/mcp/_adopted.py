"""The quarantine's adoption as an MCP tool's call and answer (`adopt_quarantine` in `TOOLS`):
`Operations.quarantine.adopt`, its counts as the command line's `quarantine adopt --json` gives
them (docs/upgrading.md)."""

from __future__ import annotations

from cosmos_outbox.http import Model
from cosmos_outbox.operations import Operations

__all__ = ["QuarantineAdopted", "adopt_quarantine"]


class QuarantineAdopted(Model):
    """The quarantine's records adopted as failure records: the unresolved ones read (`of`: how
    many the quarantine counted when it began), those kept now (`new`; the others were kept
    already), those brought to their failure record's state (`healed`: a replay or a discard
    stopped between its two writes), and new ones settled at once (`settled`: resolved or
    discarded meanwhile)."""

    read: int
    new: int
    of: int
    healed: int
    settled: int


async def adopt_quarantine(ops: Operations, _: object) -> QuarantineAdopted:
    """The adoption, done (`QuarantineOperators.adopt`): its counts."""
    adopted = await ops.quarantine.adopt()
    return QuarantineAdopted.model_validate(adopted.model_dump())
