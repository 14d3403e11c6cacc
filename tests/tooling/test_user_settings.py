"""`make run` keeps the user's local.settings.json (as funcstack keeps an app's): created when
missing; otherwise only the local connection strings move to this stack's endpoints, missing
keys are added, a value the user set (their own setting, their own Azure connection) is kept,
and the file is written only when something changed; one line says what, by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.stack import keep_user_settings

LOCAL_COSMOS = (
    "AccountEndpoint=https://127.0.0.1:9001/;AccountKey=C2y6yDjf5/R+ob0N8A7Cgv30VRD"
    "JIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==;"
)
OLD_LOCAL_COSMOS = LOCAL_COSMOS.replace(":9001", ":8081")
AZURE_SERVICEBUS = (
    "Endpoint=sb://team.servicebus.windows.net/;SharedAccessKeyName=app;SharedAccessKey=c2VjcmV0"
)
GENERATED: dict[str, Any] = {
    "IsEncrypted": False,
    "Values": {
        "CosmosDBConnection": LOCAL_COSMOS,
        "COSMOS_CONTAINER": "contacts",
        "ServiceBusConnection": "Endpoint=sb://127.0.0.1:5999;SharedAccessKeyName=k;"
        "SharedAccessKey=k;UseDevelopmentEmulator=true;",
        "NEW_SETTING": "1",
        "FUNCTIONS_WORKER_RUNTIME": "python",
    },
}
CONNECTIONS = {"cosmos": LOCAL_COSMOS, "servicebus": GENERATED["Values"]["ServiceBusConnection"]}


def test_a_missing_file_is_created(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    assert keep_user_settings(path, GENERATED, CONNECTIONS) == "local.settings.json: created"
    assert json.loads(path.read_text()) == GENERATED


def test_the_users_values_are_kept_and_only_local_endpoints_move(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    users: dict[str, Any] = {
        "IsEncrypted": False,
        "Values": {
            "CosmosDBConnection": OLD_LOCAL_COSMOS,
            "COSMOS_CONTAINER": "my-contacts",
            "ServiceBusConnection": AZURE_SERVICEBUS,
            "MY_FLAG": "on",
        },
        "Host": {"CORS": "*"},
    }
    path.write_text(json.dumps(users))
    line = keep_user_settings(path, GENERATED, CONNECTIONS)
    kept = json.loads(path.read_text())
    assert kept["Values"] == {
        **GENERATED["Values"],
        **users["Values"],
        "CosmosDBConnection": LOCAL_COSMOS,
    }
    assert kept["Host"] == {"CORS": "*"}
    assert "updated CosmosDBConnection" in line and "added NEW_SETTING" in line
    assert "kept ServiceBusConnection" in line
    assert "c2VjcmV0" not in line and "AccountKey" not in line


def test_an_up_to_date_file_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps(GENERATED))
    before = path.stat().st_mtime_ns
    assert keep_user_settings(path, GENERATED, CONNECTIONS) == "local.settings.json: unchanged"
    assert path.stat().st_mtime_ns == before
