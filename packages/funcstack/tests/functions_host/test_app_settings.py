"""App settings into the host's environment as Core Tools puts them (``_config.apply_settings``):
an environment variable already set wins over local.settings.json, and the start-up log says so
once, naming the settings whose value came from the environment (Core Tools, and funcstack
before, said it once per setting: 12 lines at every start of the Contacts app)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from funcstack.functions_host import RunningRunner
from funcstack.functions_host._config import apply_settings
from funcstack.functions_host.testing import call
from funcstack.stack import LocalStack

HERE = Path(__file__).resolve().parent


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


def test_an_empty_environment_variable_does_not_win(monkeypatch: pytest.MonkeyPatch) -> None:
    """Core Tools sets a value of the file unless the variable is set and not empty
    (``string.IsNullOrEmpty(Environment.GetEnvironmentVariable(...))``)."""
    monkeypatch.setenv("HP_EMPTY", "")
    apply_settings({"HP_EMPTY": "from-the-file"})
    assert os.environ["HP_EMPTY"] == "from-the-file"
    monkeypatch.delenv("HP_EMPTY")


@pytest.mark.integration
def test_under_a_stack_the_environment_wins_over_the_file_and_the_log_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``LocalStack.host_app`` -- what ``funcstack run`` and the plugin use -- gave the host the
    file's values as its own environment, so a variable of the environment never won over
    them (a CI override was silently not applied); now the file reaches the host as a file,
    and the environment wins as with Core Tools. The start-up line names which, never a
    value."""
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    shutil.copy(HERE / "sample_http_app.py", app_dir / "function_app.py")
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0"}))
    secret = "AccountEndpoint=https://example.invalid/;AccountKey=c2VjcmV0LWtleQ==;"
    (app_dir / "local.settings.sample.json").write_text(
        json.dumps(
            {
                "Values": {
                    "SAMPLE_SETTING": "from-the-file",
                    "SAMPLE_ROUTE": "by-the-file",
                    "ThirdPartyConnection": secret,
                }
            }
        )
    )
    monkeypatch.setenv("SAMPLE_SETTING", "from-the-environment")
    monkeypatch.setenv("SAMPLE_ROUTE", "")  # empty: the file's value applies
    monkeypatch.setenv("ThirdPartyConnection", secret.replace("example", "elsewhere"))
    stack = LocalStack(workdir=tmp_path / "stack", with_servicebus=False, with_azurite=False)
    try:
        runner = stack.host_app(app_dir, port=0, overrides={"GIVEN_SETTING": "given"})
        assert isinstance(runner, RunningRunner)
        assert call(f"{runner.url}/setting").body == b"from-the-environment"
        assert call(f"{runner.url}/by-the-file").body == b"from setting route"
    finally:
        stack.stop()
    log = stack.log_path("app").read_text("utf-8")
    assert (
        "app settings: 4 from local.settings.json; the environment's value kept over the "
        "file's, as with func start: SAMPLE_SETTING, ThirdPartyConnection; given to the host: "
        "GIVEN_SETTING"
    ) in log
    assert "from-the-environment" not in log and "c2VjcmV0LWtleQ" not in log
