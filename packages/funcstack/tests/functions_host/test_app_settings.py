"""App settings into the host's environment as Core Tools puts them (``_config.apply_settings``):
an environment variable already set wins over local.settings.json, and the start-up log says so
once, naming the settings whose value came from the environment (Core Tools, and funcstack
before, said it once per setting: 12 lines at every start of the Contacts app)."""

from __future__ import annotations

import logging
import os

import pytest

from funcstack.functions_host._config import apply_settings


def test_one_line_names_the_settings_the_environment_gave(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    file_values = {f"HP_SETTING_{i}": f"file-{i}" for i in range(12)}
    for i in range(12):  # as funcstack run starts a host: the file's values in its environment
        monkeypatch.setenv(f"HP_SETTING_{i}", f"file-{i}")
    monkeypatch.setenv("HP_SETTING_3", "from-the-shell")
    monkeypatch.delenv("HP_SETTING_5")
    monkeypatch.delenv("HP_EXPLICIT", raising=False)
    with caplog.at_level(logging.INFO, logger="funcstack.functions_host"):
        apply_settings(file_values, {"HP_EXPLICIT": "x"})
    assert os.environ["HP_SETTING_3"] == "from-the-shell"  # the environment wins
    assert os.environ["HP_SETTING_5"] == "file-5"
    assert os.environ["HP_EXPLICIT"] == "x"
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "app settings: 12 from local.settings.json; the environment's value kept "
        "over the file's, as with func start: HP_SETTING_3; given to the host: "
        "HP_EXPLICIT"
    ]
    monkeypatch.delenv("HP_EXPLICIT")
