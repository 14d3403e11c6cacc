"""An app's `local.settings.json` read as the Functions host reads it for its worker: its
`Values` become the process's environment, **the environment winning** (a variable already set
is kept, as `func start` keeps it and as a container's settings win over a file baked in). So
`cosmos-outbox relay --settings local.settings.json` reads the settings the Functions app reads,
under the same names, and nothing else: the outbox's settings are read from the environment
once that is done."""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping
from pathlib import Path

from cosmos_outbox.settings import SettingsError


def read_local_settings(path: str | Path) -> dict[str, str]:
    """The `Values` of a local.settings.json, as strings (SettingsError naming the file when it
    cannot be read as one)."""
    where = Path(path)
    try:
        document = json.loads(where.read_text("utf-8-sig"))
    except FileNotFoundError:
        raise SettingsError(f"{where}: no such settings file") from None
    except (OSError, ValueError) as exc:
        raise SettingsError(f"{where}: not a local.settings.json ({exc})") from None
    values = document.get("Values") if isinstance(document, dict) else None
    if not isinstance(values, dict):
        raise SettingsError(f'{where}: no "Values" object (a local.settings.json has one)')
    found = {}
    for name, value in values.items():
        if isinstance(value, bool):
            found[str(name)] = "true" if value else "false"
        elif value is not None:
            found[str(name)] = str(value)
    return found


def use_local_settings(
    path: str | Path, environ: MutableMapping[str, str] | None = None
) -> list[str]:
    """Put the `Values` of the local.settings.json at `path` in `environ` (the process's, by
    default) where they are not set already: the environment wins. The names it set."""
    target = os.environ if environ is None else environ
    added = []
    for name, value in read_local_settings(path).items():
        if name not in target:
            target[name] = value
            added.append(name)
    return added
