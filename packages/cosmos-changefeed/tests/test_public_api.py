"""The public surface is documented: every name in the ``__all__`` of ``cosmos_changefeed``,
``cosmos_changefeed.aio`` and ``cosmos_changefeed.testing`` is in the README's "API" section,
each listed name exists, and no other module is public (issue 91: the package's surface
documented as a port, as azure-eventhub's ``CheckpointStore`` documents every dict's keys)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import cosmos_changefeed

README = Path(__file__).resolve().parents[1] / "README.md"
PUBLIC = ("cosmos_changefeed", "cosmos_changefeed.aio", "cosmos_changefeed.testing")


def api_section() -> str:
    text = README.read_text("utf-8")
    start = text.index("\n## API\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_no_other_module_is_public() -> None:
    found = {
        module.name
        for module in pkgutil.walk_packages(cosmos_changefeed.__path__, "cosmos_changefeed.")
        if not any(part.startswith("_") for part in module.name.split(".")[1:])
    }
    assert found | {"cosmos_changefeed"} == set(PUBLIC)


@pytest.mark.parametrize("module", PUBLIC)
def test_every_public_name_is_in_the_readmes_api_section(module: str) -> None:
    imported = importlib.import_module(module)
    names = imported.__all__
    assert all(hasattr(imported, name) for name in names), module
    section = api_section()
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", section))
    missing = [name for name in names if name not in named]
    assert missing == [], f"{module}: not in the README's API section: {missing}"
