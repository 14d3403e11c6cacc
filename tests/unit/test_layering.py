"""The direction of dependencies: entrypoints -> application -> domain; infra -> domain; the
local stack tool (packages/funcstack) knows nothing of this app; the subscriber is an app of its
own; tooling (tools/) and benchmarks use the app, never the tests, and the app never uses them."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = {"domain", "application", "infra", "entrypoints", "function_app"}
FUNCSTACK_SRC = "packages/funcstack/src/funcstack"
FUNCSTACK_TESTS = "packages/funcstack/tests"


def imported_roots(package: str) -> set[str]:
    """Top-level modules imported (absolute imports) anywhere in a package or a module file."""
    target = ROOT / package
    paths = [target] if target.is_file() else sorted(target.rglob("*.py"))
    roots: set[str] = set()
    for path in paths:
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots.add(node.module.split(".")[0])
    return roots


def test_domain_imports_only_the_standard_library_and_pydantic() -> None:
    foreign = {
        name for name in imported_roots("domain")
        if name not in sys.stdlib_module_names and name not in {"pydantic", "domain"}
    }
    assert foreign == set()


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("domain", {"application", "infra", "entrypoints", "function_app", "azure", "tools"}),
        ("application", {"infra", "entrypoints", "function_app", "azure", "tools"}),
        ("infra", {"entrypoints", "function_app", "tools"}),
        ("entrypoints", {"function_app", "tools", "funcstack", "tests", "bench"}),
        ("function_app.py", {"tools", "funcstack", "tests", "bench"}),
        # The local stack tool serves any app: neither it nor its tests import this one.
        (FUNCSTACK_SRC, APP | {"subscriber", "contacts_projection", "tools", "bench", "tests",
                               "conformance"}),
        (FUNCSTACK_TESTS, APP | {"subscriber", "contacts_projection", "tools", "bench", "tests",
                                 "conformance"}),
        # A separate Function App, deployed on its own: it shares no code with this one.
        ("subscriber", APP | {"tools", "funcstack", "tests", "bench"}),
        ("tools", {"tests", "bench"}),
        ("bench", {"tests"}),
    ],
)
def test_packages_never_import_what_they_must_not(package: str, forbidden: set[str]) -> None:
    assert imported_roots(package) & forbidden == set()


#: The Functions host's own settings (every app has them), not this app's.
HOST_SETTINGS = {"FUNCTIONS_WORKER_RUNTIME", "AzureWebJobsStorage"}
SAMPLES = ("local.settings.sample.json", "subscriber/local.settings.sample.json")


def app_names() -> set[str]:
    """This app's own names: its database, containers, topic and subscriptions (from its local
    settings and its Service Bus entity config), and the words naming its aggregate and
    pattern."""
    names = {"contact", "outbox"}
    for sample in SAMPLES:
        values = json.loads((ROOT / sample).read_text("utf-8"))["Values"]
        names |= {v for k, v in values.items()
                  if k in {"COSMOS_DATABASE", "COSMOS_CONTAINER", "COSMOS_LEASE_CONTAINER",
                           "PROJECTION_CONTAINER", "SERVICEBUS_TOPIC", "SUBSCRIBER_SUBSCRIPTION"}}
    config = json.loads((ROOT / "tools" / "servicebus-config.json").read_text("utf-8"))
    for namespace in config["UserConfig"]["Namespaces"]:
        for topic in namespace.get("Topics", []):
            names.add(topic["Name"])
            names |= {sub["Name"] for sub in topic.get("Subscriptions", [])}
        names |= {queue["Name"] for queue in namespace.get("Queues", [])}
    declared = json.loads((ROOT / "tools" / "funcstack.json").read_text("utf-8"))
    for database in declared["Cosmos"]["Databases"]:
        names.add(database["Name"])
        names |= {container["Name"] for container in database["Containers"]}
    return names


def app_settings() -> set[str]:
    """The names of this app's settings (both apps' samples), the host's own left out."""
    return {k for sample in SAMPLES
            for k in json.loads((ROOT / sample).read_text("utf-8"))["Values"]} - HOST_SETTINGS


#: Names the stand-ins may use because they are not this app's: "leases" is the Cosmos DB
#: trigger's documented default lease container (leaseContainerName unset), which the local
#: host applies as the Functions host does.
NOT_THE_APPS = {"leases"}
#: Ordinary words among the names: looked for only as a string literal ('tail', "tail").
WORDS = {"tail"}


def patterns() -> dict[str, re.Pattern[str]]:
    found = {}
    for name in app_names() - NOT_THE_APPS:
        if name in WORDS:
            found[name] = re.compile(rf"""["'`]{re.escape(name)}["'`]""")
        else:  # anywhere, in any case: contactId, Contacts, OUTBOX_..., contact-events
            found[name] = re.compile(re.escape(name), re.IGNORECASE)
    for setting in app_settings():  # as an identifier: COSMOS_DATABASE, ServiceBusConnection
        found[setting] = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(setting)}(?![A-Za-z0-9_])")
    return found


def names_in(text: str) -> set[str]:
    return {name for name, pattern in patterns().items() if pattern.search(text)}


def test_the_app_names_are_found_where_they_are() -> None:
    """The check below can see them: they are in this app's own tooling."""
    assert {"outbox", "contacts", "contact-events", "all-events", "contact-projection",
            "contact-projections", "tail"} <= app_names()
    assert {"COSMOS_DATABASE", "ServiceBusConnection", "SUBSCRIBER_SUBSCRIPTION"} <= app_settings()
    found = names_in((ROOT / "tools" / "stack.py").read_text("utf-8"))
    assert {"contact", "contact-events", "all-events", "COSMOS_DATABASE"} <= found
    assert names_in("const tail = 1; // leases; MY_COSMOS_DATABASE_X") == set()


def test_the_local_stack_tool_names_nothing_of_this_app() -> None:
    """Containers, topic, subscriptions, routes and settings come from configuration or
    arguments: funcstack's source (Python, JavaScript, its package.json; not its docs or the
    npm lock file) names none of them, not even as a default."""
    sources = [p for p in sorted((ROOT / FUNCSTACK_SRC).rglob("*"))
               if (p.suffix in {".py", ".js"} or p.name == "package.json")
               and "node_modules" not in p.parts]
    assert len(sources) > 20
    offenders = {str(p.relative_to(ROOT)): sorted(found) for p in sources
                 if (found := names_in(p.read_text("utf-8")))}
    assert offenders == {}


def test_importing_the_app_opens_no_connection_and_builds_nothing() -> None:
    """Imported with no settings at all: no socket is touched, no dependency is built."""
    import os
    import subprocess

    probe = (
        "import sys\n"
        "events = []\n"
        "sys.addaudithook(lambda e, a: events.append(e) if e.startswith('socket.') else None)\n"
        "import function_app\n"
        "from entrypoints import bootstrap\n"
        "assert bootstrap._current is None, 'dependencies built at import'\n"
        "assert not events, events\n"
        "print('clean')\n"
    )
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("Cosmos", "COSMOS", "ServiceBus", "SERVICEBUS"))}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean"
