from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from funcstack.functions_host._launcher import RunningRunner, start_runner

HERE = Path(__file__).resolve().parent


def make_app_dir(tmp: Path, sample: str, settings: dict[str, str]) -> Path:
    app_dir = tmp / "app"
    app_dir.mkdir()
    shutil.copy(HERE / sample, app_dir / "function_app.py")
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0"}))
    (app_dir / "local.settings.json").write_text(
        json.dumps({"IsEncrypted": False, "Values": settings})
    )
    return app_dir


@pytest.fixture(scope="module")
def http_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRunner]:
    tmp = tmp_path_factory.mktemp("http")
    app_dir = make_app_dir(
        tmp,
        "sample_http_app.py",
        {
            "FUNCTIONS_WORKER_RUNTIME": "python",
            "SAMPLE_SETTING": "from-local-settings",
            "SAMPLE_ROUTE": "by-setting",
            "AzureWebJobs.disabled_fn.Disabled": "true",
            "AzureWebJobsDisableHomepage": "TRUE",  # any case: the landing page answers 204
        },
    )
    runner = start_runner(
        app_dir=app_dir, settings_file=app_dir / "local.settings.json", log_path=tmp / "runner.log"
    )
    try:
        yield runner
    finally:
        runner.stop()
