"""Files kept as verbatim copies, as a user copies them: cosmos-outbox's tests start funcstack's
services on Python 3.11 and 3.12 with funcstack's `funcstack.external`, copied into their folder
as funcstack's docs/other-pythons.md tells an app on those versions to (funcstack cannot be
installed there). The copy is the module, byte for byte."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEADLINES = "packages/funcstack/src/funcstack/deadlines.py"
COPIES = {
    "packages/cosmos-outbox/tests/funcstack_external.py": (
        "packages/funcstack/src/funcstack/external.py"
    ),
    # the named deadlines (docs/testing.md): these suites run on Python 3.11 too, without funcstack
    "packages/cosmos-outbox/tests/deadlines.py": DEADLINES,
    "packages/cosmos-changefeed/tests/deadlines.py": DEADLINES,
    "packages/cosmos-sql/tests/deadlines.py": DEADLINES,
    "packages/cosmos-outbox-operators/tests/deadlines.py": DEADLINES,
}


def test_each_copy_is_its_original_byte_for_byte() -> None:
    for copy, original in COPIES.items():
        assert (ROOT / copy).read_bytes() == (ROOT / original).read_bytes(), (
            f"{copy} differs from {original}: copy it again"
        )
