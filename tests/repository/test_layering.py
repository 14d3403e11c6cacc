"""The direction of dependencies: the app (entrypoints -> application -> domain; infra ->
domain) builds on cosmos-outbox, which knows no app; the domain core (the app's `domain/` and the
package's `cosmos_outbox._domain` and `cosmos_outbox.text`) imports only the standard library
and pydantic; the local stack tool (packages/funcstack) knows nothing of this app; the subscriber
is an app of its own; tooling (tools/) and benchmarks use the app, never the tests, and the app
never uses them."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from funcstack.deadlines import SHORT
from tests.repository import syntax

ROOT = Path(__file__).resolve().parents[2]
APP = {"domain", "application", "infra", "entrypoints", "function_app"}
PACKAGE = "packages/cosmos-outbox/src/cosmos_outbox"
#: The package's domain core, and the namespaces an app's domain takes it from (they import
#: nothing else until a name is used): what an app's domain may import of it.
DOMAIN_CORE = {"cosmos_outbox._domain", "cosmos_outbox.clock", "cosmos_outbox.text"}
ROOT_MODULE = "cosmos_outbox"
DOMAIN_NAMESPACES = {ROOT_MODULE, "cosmos_outbox.aggregates"}
FUNCSTACK_SRC = "packages/funcstack/src/funcstack"
FUNCSTACK_TESTS = "packages/funcstack/tests"
CHANGEFEED_SRC = "packages/cosmos-changefeed/src/cosmos_changefeed"
SQL_SRC = "packages/cosmos-sql/src/cosmos_sql"


def imported_modules(package: str) -> set[str]:
    """Modules imported (absolute imports, dotted) anywhere in a package or a module file."""
    target = ROOT / package
    paths = [target] if target.is_file() else sorted(target.rglob("*.py"))
    modules: set[str] = set()
    for path in paths:
        if "node_modules" in path.parts:
            continue
        for node in syntax.nodes(path):
            if isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module)
    return modules


def imported_roots(package: str) -> set[str]:
    """Top-level modules imported (absolute imports) anywhere in a package or a module file."""
    return {name.split(".")[0] for name in imported_modules(package)}


def foreign_to_the_domain(modules: set[str], own: str) -> set[str]:
    return {
        name
        for name in modules
        if name.split(".")[0] not in sys.stdlib_module_names | {"pydantic", "pydantic_core", own}
        and name not in DOMAIN_NAMESPACES
        and not any(name == core or name.startswith(f"{core}.") for core in DOMAIN_CORE)
    }


def test_domain_imports_only_the_standard_library_pydantic_and_the_domain_core() -> None:
    assert foreign_to_the_domain(imported_modules("domain"), "domain") == set()


@pytest.mark.parametrize("core", ["_domain.py", "clock.py", "text"])
def test_the_packages_domain_core_imports_only_the_standard_library_and_pydantic(
    core: str,
) -> None:
    modules = imported_modules(f"{PACKAGE}/{core}")
    assert foreign_to_the_domain(modules, "cosmos_outbox") == set()
    assert {m for m in modules if m.startswith("cosmos_outbox")} <= DOMAIN_CORE | {
        f"{c}._rules" for c in DOMAIN_CORE
    }


def test_the_package_imports_nothing_of_any_app_or_of_this_repository() -> None:
    assert (
        imported_roots(PACKAGE)
        & (
            APP
            | {
                "tools",
                "tests",
                "bench",
                "funcstack",
                "subscriber",
                "contacts_projection",
                "conformance",
                "orders",
            }
        )
        == set()
    )


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("domain", {"application", "infra", "entrypoints", "function_app", "azure", "tools"}),
        ("application", {"infra", "entrypoints", "function_app", "azure", "tools"}),
        ("infra", {"entrypoints", "function_app", "tools"}),
        ("entrypoints", {"function_app", "tools", "funcstack", "tests", "bench"}),
        # Decided: only the composition root (entrypoints/bootstrap.py) wires adapters, so the
        # HTTP layer of the app (its blueprint, its models) never imports infra/.
        ("entrypoints/contacts.py", {"infra"}),
        ("entrypoints/operators.py", {"infra"}),
        ("function_app.py", {"tools", "funcstack", "tests", "bench"}),
        # The local stack tool serves any app: neither it nor its tests import this one.
        (
            FUNCSTACK_SRC,
            APP
            | {
                "subscriber",
                "contacts_projection",
                "tools",
                "bench",
                "tests",
                "conformance",
                "cosmos_outbox",
                "orders",
            },
        ),
        (
            FUNCSTACK_TESTS,
            APP
            | {
                "subscriber",
                "contacts_projection",
                "tools",
                "bench",
                "tests",
                "conformance",
                "cosmos_outbox",
                "orders",
            },
        ),
        # A separate Function App, deployed on its own: it shares no code with this one (it
        # shares the library).
        ("subscriber", APP | {"tools", "funcstack", "tests", "bench"}),
        # The example: the library alone (`function_app` there is its own).
        (
            "examples/orders",
            APP - {"function_app"}
            | {"tools", "tests", "bench", "subscriber", "contacts_projection"},
        ),
        (
            "examples/library-loans",
            APP - {"function_app"}
            | {"tools", "tests", "bench", "subscriber", "contacts_projection"},
        ),
        ("tools", {"tests", "bench"}),
        ("bench", {"tests"}),
    ],
)
def test_packages_never_import_what_they_must_not(package: str, forbidden: set[str]) -> None:
    assert imported_roots(package) & forbidden == set()


def test_the_change_feed_processor_knows_no_outbox_and_needs_only_the_cosmos_sdk() -> None:
    """cosmos-changefeed (issue 64): no outbox concept, no funcstack; the standard library, the
    Azure SDK (azure-cosmos, and azure-core under it) and pytest for its shipped contract suite."""
    allowed = set(sys.stdlib_module_names) | {"azure", "cosmos_changefeed", "pytest"}
    assert imported_roots(CHANGEFEED_SRC) - allowed == set()


def test_the_sql_engine_knows_no_outbox_no_azure_and_needs_only_lark() -> None:
    """cosmos-sql (issue 97): Cosmos DB's SQL over JSON documents; the standard library and its
    grammar's parser (lark), nothing of the outbox, the kit, funcstack or the Azure SDKs."""
    allowed = set(sys.stdlib_module_names) | {"lark", "cosmos_sql"}
    assert imported_roots(SQL_SRC) - allowed == set()


#: The core's rooms that compose: the relay as a process (`_relay_process`), the faces and the
#: blueprints that build or serve the relay, and the wiring they build it with. Under them the
#: operators' one API (`operations`), under that the relay (`_relay`); each room imports only
#: rooms below it (farm-studio look: no arrow runs back up).
COMPOSERS = ("_relay_process", "_blueprints", "_outbox", "relay", "services", "_wiring")
#: The rooms under the relay (the adapters, the mapper, the write path, the subscriber, the
#: quarantine) import none of those, nor the HTTP layer.
UNDER_THE_RELAY = ("servicebus", "cosmos", "blob", "_mapper", "_write", "subscriber")


ROOMS_AND_ABOVE = [
    ("_wiring.py", set(COMPOSERS) - {"_wiring"}),
    ("operations", set(COMPOSERS)),
    ("_relay", {*COMPOSERS, "operations", "http"}),
    *[
        (room, {*COMPOSERS, "operations", "_relay", "http"})
        for room in (*UNDER_THE_RELAY, "_quarantine.py")
    ],
]


@pytest.mark.parametrize(("room", "above"), ROOMS_AND_ABOVE, ids=[r for r, _ in ROOMS_AND_ABOVE])
def test_the_cores_rooms_import_no_room_above_them(room: str, above: set[str]) -> None:
    taken = {
        module
        for module in imported_modules(f"{PACKAGE}/{room}")
        for name in above
        if module == f"{ROOT_MODULE}.{name}" or module.startswith(f"{ROOT_MODULE}.{name}.")
    }
    assert taken == set()


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
        names |= {
            v
            for k, v in values.items()
            if k
            in {
                "COSMOS_DATABASE",
                "COSMOS_CONTAINER",
                "COSMOS_LEASE_CONTAINER",
                "PROJECTION_CONTAINER",
                "SERVICEBUS_TOPIC",
                "SUBSCRIBER_SUBSCRIPTION",
            }
        }
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
    names |= {container["Name"] for container in declared["Storage"]["BlobContainers"]}
    return names


def app_settings() -> set[str]:
    """The names of this app's settings (both apps' samples), the host's own left out."""
    return {
        k for sample in SAMPLES for k in json.loads((ROOT / sample).read_text("utf-8"))["Values"]
    } - HOST_SETTINGS


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
    assert {
        "outbox",
        "contacts",
        "contact-events",
        "all-events",
        "contact-projection",
        "contact-projections",
        "tail",
    } <= app_names()
    assert {"COSMOS_DATABASE", "ServiceBusConnection", "SUBSCRIBER_SUBSCRIPTION"} <= app_settings()
    found = names_in((ROOT / "tools" / "stack.py").read_text("utf-8"))
    assert {"contact", "contact-events", "all-events", "COSMOS_DATABASE"} <= found
    assert names_in("const tail = 1; // leases; MY_COSMOS_DATABASE_X") == set()


def test_the_local_stack_tool_names_nothing_of_this_app() -> None:
    """Containers, topic, subscriptions, routes and settings come from configuration or
    arguments: funcstack's source (Python, JavaScript, its package.json; not its docs or the
    npm lock file) names none of them, not even as a default."""
    sources = [
        p
        for p in sorted((ROOT / FUNCSTACK_SRC).rglob("*"))
        if (p.suffix in {".py", ".js"} or p.name == "package.json")
        and "node_modules" not in p.parts
    ]
    assert len(sources) > 20
    offenders = {
        str(p.relative_to(ROOT)): sorted(found)
        for p in sources
        if (found := names_in(p.read_text("utf-8")))
    }
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
        "function_app.app.get_functions()\n"
        "assert not events, events\n"
        "built = [m for m in ('azure.cosmos', 'azure.servicebus', 'azure.storage.blob')\n"
        "         if m in sys.modules]\n"
        "assert not built, f'{built} imported at indexing: clients built?'\n"
        "print('clean')\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("Cosmos", "COSMOS", "ServiceBus", "SERVICEBUS"))
    }
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SHORT,  # an interpreter importing the app
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean"


def _modules() -> dict[str, Path]:
    """The app's modules and the library's, by dotted name."""
    found = {"function_app": ROOT / "function_app.py"}
    src = ROOT / "packages" / "cosmos-outbox" / "src"
    changefeed = ROOT / "packages" / "cosmos-changefeed" / "src"
    roots = [(src, src / "cosmos_outbox"), (changefeed, changefeed / "cosmos_changefeed")] + [
        (ROOT, ROOT / p) for p in sorted(APP - {"function_app"})
    ]
    for base, folder in roots:
        for path in sorted(folder.rglob("*.py")):
            name = ".".join(path.relative_to(base).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _runtime_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules a module imports when it is imported (its body; not TYPE_CHECKING blocks,
    not function bodies), resolved to the known modules."""
    found: set[str] = set()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for node in syntax.tree(path).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node]:
            if isinstance(sub, ast.Import):
                names = [alias.name for alias in sub.names]
            elif isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                submodules = [
                    f"{sub.module}.{a.name}"
                    for a in sub.names
                    if f"{sub.module}.{a.name}" in modules
                ]
                names = (
                    submodules if len(submodules) == len(sub.names) else [sub.module, *submodules]
                )
            else:
                continue
            found |= {m for n in names if (m := known(n)) is not None}
    return found


def test_no_module_of_the_app_or_the_library_imports_itself_in_a_cycle() -> None:
    modules = _modules()
    graph = {m: _runtime_imports(p, modules) - {m} for m, p in modules.items()}
    assert len(graph) > 60
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                cycles.append([*path[path.index(imported) :], imported])
            elif imported not in state:
                visit(imported)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == []


#: Every folder and file of this repository's apps, tools and tests (not the packages').
APP_AND_ITS_TOOLS = (
    "function_app.py",
    "domain",
    "application",
    "infra",
    "entrypoints",
    "subscriber",
    "tools",
    "bench",
    "tests",
    "conformance",
    "examples",
)


def private_library_imports(path: Path) -> list[str]:
    """`module` (or `module.name`) for each import in `path` of a private cosmos_outbox module
    or name (a part after `cosmos_outbox` starting with `_`)."""
    found = []
    for node in syntax.nodes(path):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == ROOT_MODULE and any(p.startswith("_") for p in parts[1:]):
                found.append(name)
    return found


def test_the_app_its_tools_and_tests_import_only_the_librarys_public_names() -> None:
    """What the app, its tests, tools and benchmarks need of cosmos-outbox is its public API
    (issue 46): no import of a `cosmos_outbox._*` module or name."""
    found = {}
    for entry in APP_AND_ITS_TOOLS:
        target = ROOT / entry
        for path in [target] if target.is_file() else sorted(target.rglob("*.py")):
            if {"node_modules", "wheels", ".funcstack", ".stack"} & set(path.parts):
                continue
            relative = str(path.relative_to(ROOT))
            if private := [
                name
                for name in private_library_imports(path)
                if not any(
                    relative == allowed and (name == module or name.startswith(f"{module}."))
                    for allowed, module in ALLOWED_PRIVATE_IMPORTS
                )
            ]:
                found[relative] = private
    assert found == {}


def test_a_private_import_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from cosmos_outbox._documents import read_feed\n"
        "from cosmos_outbox.http import _bounded\nimport cosmos_outbox_testing\n"
        "def f() -> None:\n    import cosmos_outbox._sync_over_async\n"
    )
    assert private_library_imports(module) == [
        "cosmos_outbox._documents.read_feed",
        "cosmos_outbox.http._bounded",
        "cosmos_outbox._sync_over_async",
    ]


#: The packages whose sources are the floors others stand on: a module of one imports the others'
#: public names only, and a module outside them (the app, its tools, benchmarks, the conformance
#: run, every test tree) imports no package's private module (issue 57).
PACKAGE_SOURCES = {
    "cosmos_outbox": PACKAGE,
    "cosmos_outbox_operators": "packages/cosmos-outbox-operators/src/cosmos_outbox_operators",
    "cosmos_outbox_testing": "packages/cosmos-outbox-testing/src/cosmos_outbox_testing",
    "funcstack": FUNCSTACK_SRC,
    "cosmos_changefeed": CHANGEFEED_SRC,
    "cosmos_sql": SQL_SRC,
}
#: The packages' folders: their tests and scripts may use their own package's private modules.
PACKAGE_FOLDERS = {
    "packages/cosmos-outbox/": "cosmos_outbox",
    "packages/cosmos-outbox-operators/": "cosmos_outbox_operators",
    "packages/cosmos-outbox-testing/": "cosmos_outbox_testing",
    "packages/funcstack/": "funcstack",
    "packages/cosmos-changefeed/": "cosmos_changefeed",
    "packages/cosmos-sql/": "cosmos_sql",
}
#: The only private imports outside a package, each a test that reads another project's
#: internals on purpose and says so, and fails loudly (an ImportError, a changed byte) if they
#: move: never a floor product code stands on.
ALLOWED_PRIVATE_IMPORTS = {
    # Runs funcstack's Cosmos DB query handler in-process beside cosmos-sql's engine (docs/
    # cosmos-sql.md): Node, funcstack's Node packages and the endpoint's modules are where
    # funcstack keeps them; if they move, the test's fixture fails naming the import.
    ("packages/cosmos-sql/tests/test_engines_agree.py", "funcstack._cache"),
    ("packages/cosmos-sql/tests/test_engines_agree.py", "funcstack.cosmos._launcher"),
    # Holds the core's Service Bus rule evaluator and funcstack's endpoint's equal (neither may
    # depend on the other, so each keeps its own); skipped without funcstack (its docstring).
    (
        "packages/cosmos-outbox/tests/adapters/test_rules_agree_with_funcstack.py",
        "funcstack.servicebus._filters",
    ),
    # Pins the AMQP bytes the relay hands to the link: only the SDK's own encoder can say
    # what `send_messages` transfers (its module docstring).
    ("packages/cosmos-outbox/tests/relay/test_wire_bytes.py", "azure.servicebus._pyamqp"),
    # Speed only: Hypothesis' regex strategies kept once built; if they move, nothing is
    # patched and the tests run as they are (its module docstring).
    ("tests/contacts/api/test_api_generative.py", "hypothesis.strategies._internal"),
    # Speed only: the coverage phase's slow draws kept and handed out again, the same values;
    # if schemathesis' internals move, nothing is patched (its module docstring).
    ("tests/contacts/api/test_api_generative.py", "schemathesis.specs.openapi.coverage._schema"),
    # Two relay hosts, each with its own name and clock, working one bulk operation: the second
    # sees the first's lease run out without waiting for it (a constant and the worker of the
    # core's operations); if they move, the import fails loudly.
    (
        "packages/cosmos-outbox-operators/tests/operators/test_bulk_operations.py",
        "cosmos_outbox.operations._bulk._worker",
    ),
    # the same for the re-drive's operation, and its batch's size (a batch in flight)
    (
        "packages/cosmos-outbox-operators/tests/operators/test_redrive_operation.py",
        "cosmos_outbox.operations._bulk._worker",
    ),
    # Times the failures' ingest as `cosmos-outbox relay` runs it (its receiver over its
    # `Failures`, in the bench's process, on funcstack's endpoints): the bench of issue 95 item
    # 8; neither is public (the relay process is the command). If they move, it fails loudly.
    ("bench/failure_ingest.py", "cosmos_outbox.operations._failures"),
    ("bench/failure_ingest.py", "cosmos_outbox._relay_process.failure_receiver"),
    # ... and times the group's retry operation over those failures as the relay's hosts work
    # it (the operations' store, worker and the records' items, none public: an operator starts
    # one through the routes, which the bench would only add HTTP to).
    ("bench/failure_ingest.py", "cosmos_outbox._mapper"),
    ("bench/failure_ingest.py", "cosmos_outbox.operations._bulk._items"),
    ("bench/failure_ingest.py", "cosmos_outbox.operations._bulk._operation"),
    ("bench/failure_ingest.py", "cosmos_outbox.operations._bulk._worker"),
    ("bench/failure_ingest.py", "cosmos_outbox.operations._dead_letters"),
    # The stored forms' field names are derived from the mapper's own writers (the rule that
    # only the mapper reads them): only the mapper can say what it writes.
    ("tests/repository/test_layering.py", "cosmos_outbox._mapper"),
    ("tests/repository/test_layering.py", "cosmos_outbox._records"),
    # A dead letter's reading and its resubmission's MessageId, unit-tested beside the routes
    # that resubmit (the core's own functions, which no way in calls by name).
    (
        "packages/cosmos-outbox-operators/tests/operators/test_recovery.py",
        "cosmos_outbox.operations._dead_letters",
    ),
    # Ends the dead letters' watch's grace period (20 s: a resubmission may still be on its
    # way) to see a dead letter that left unapplied said vanished without waiting (a constant
    # of the core's operations, read where it is used); if it moves, the import fails loudly.
    (
        "packages/cosmos-outbox-operators/tests/operators/test_vanished_dead_letters.py",
        "cosmos_outbox.operations._watch",
    ),
}


def private_module_imports(path: Path) -> list[str]:
    """Each absolute import in `path` (`module`, or `module.name` for a `from` import) with a
    private part: a dotted part starting with `_` that is not a dunder (`__init__`)."""
    found = []
    for node in syntax.nodes(path):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if any(p.startswith("_") and not p.endswith("__") for p in name.split(".")):
                found.append(name)
    return found


def _own_top(relative: str) -> str:
    """The top-level import name a file outside the packages' sources owns: its package's in a
    package's folder (its tests, its scripts), else the repository folder it is in (bench,
    tools, tests, ...)."""
    for folder, package in PACKAGE_FOLDERS.items():
        if relative.startswith(folder):
            return package
    return relative.split("/")[0].removesuffix(".py")


def _python_files_outside_the_packages() -> list[Path]:
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        ROOT / f
        for f in tracked
        if not any(f.startswith(f"{src}/") for src in PACKAGE_SOURCES.values())
    ]


def test_no_module_outside_a_package_imports_a_private_module_of_another_package() -> None:
    """funcstack and cosmos_outbox stand on public floors (issue 57): bench/, conformance/, the
    app, its tools and every test tree use the public names of funcstack, cosmos_outbox, the
    Azure SDKs and any other library; a package's own tests may test its private modules."""
    found: dict[str, list[str]] = {}
    for path in _python_files_outside_the_packages():
        relative = str(path.relative_to(ROOT))
        own = _own_top(relative)
        foreign = [
            name
            for name in private_module_imports(path)
            if name.split(".")[0] != own
            and not any(
                relative == allowed and (name == module or name.startswith(f"{module}."))
                for allowed, module in ALLOWED_PRIVATE_IMPORTS
            )
        ]
        if foreign:
            found[relative] = foreign
    assert found == {}


def test_a_private_module_of_another_package_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from funcstack.servicebus._launcher import start_servicebus\n"
        "import azure.functions._abc\nfrom funcstack.servicebus import start_servicebus\n"
        "from azure.servicebus import ServiceBusMessage\nimport os.path, __future__\n"
        "def f() -> None:\n    from hypothesis.strategies._internal import regex\n"
    )
    assert private_module_imports(module) == [
        "funcstack.servicebus._launcher.start_servicebus",
        "azure.functions._abc",
        "hypothesis.strategies._internal.regex",
    ]
    assert _own_top("packages/funcstack/tests/servicebus/test_channels.py") == "funcstack"
    assert _own_top("bench/peers.py") == "bench"


# -- the mapper owns the stored forms (issue 74) ------------------------------------------------

#: The sources whose reads of stored documents and messages are held to the mapper: the core,
#: its ways in and the test kit's own code (the kit's contract suites, tests shipped in it,
#: inspect the stored forms on purpose, as tests do).
MAPPED_SOURCES = (
    "packages/cosmos-outbox/src",
    "packages/cosmos-outbox-operators/src",
    "packages/cosmos-outbox-testing/src",
)
MAPPER = f"{PACKAGE}/_mapper/"
#: Keys every document of a container has whatever its form: Cosmos DB's own (`id`, `ttl`), the
#: partition key's path and the `type` each stored form names itself with; the store adapter
#: and every form's owner key on them.
CONTAINER_KEYS = {"id", "partitionKey", "type", "ttl"}


def mapper_field_names() -> set[str]:
    """The field names of the mapper's forms, as its writers write them: the event document (a
    scheduled one, released and cancelled), its message's application properties and
    CloudEvents attributes, the quarantine and discard notices (properties and body), a
    release's body, and the property names it declares. Derived by calling the mapper, not
    listed by hand."""
    import json as _json
    from datetime import UTC, datetime

    from cosmos_outbox import _mapper as mapper
    from cosmos_outbox._mapper import properties
    from cosmos_outbox._records import Release

    at = "2026-01-01T00:00:00+00:00"
    document = mapper.event_document(
        event_id="e",
        partition_key="p",
        aggregate_type="thing",
        aggregate_id="a",
        source="/things",
        action="Done",
        body="{}",
        ttl=1,
        created_at=at,
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        subject="s",
        properties="{}",
        deliver_at=at,
    )
    names = {*document, *mapper.cancelled(document, at), *mapper.released(document, at, 1)}
    message = mapper.to_message(mapper.outbox_record(document))
    names |= {*message.application_properties, *mapper.application_properties(message)}
    notices = [
        mapper.quarantine_notice(mapper.outbox_record(document), "r"),
        mapper.discard_notice(
            aggregate_type="thing",
            aggregate_id="a",
            version=1,
            event_id="e",
            action="Done",
            reason="r",
            by="b",
            at=datetime.now(UTC),
            source="/things",
            target="t",
        ),
    ]
    for notice in notices:
        assert notice is not None
        names |= {*notice.application_properties, *_json.loads(notice.body)}
    names |= set(_json.loads(mapper.release_body(Release("p", "e", datetime.now(UTC)))))
    names |= {v for k, v in vars(properties).items() if k.endswith("_PROPERTY")}
    return names - {"thingId"} - CONTAINER_KEYS


def _keys_of_stored_forms(tree: ast.AST) -> set[str]:
    """Every dict key of a module that stores a document of a form of its own (a dict literal
    with `id` and `partitionKey`): the names of its own forms."""
    dicts = [node for node in ast.walk(tree) if isinstance(node, ast.Dict)]
    keys = [{k.value for k in d.keys if isinstance(k, ast.Constant)} for d in dicts]
    if not any({"id", "partitionKey"} <= found for found in keys):
        return set()
    return {k for found in keys for k in found if isinstance(k, str)}


def field_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each string constant read as a mapping's key: `x["name"]`,
    `x.get("name")` (`pop`, `setdefault`), `"name" in x`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"get", "pop", "setdefault"}
            and node.args
        ):
            key = node.args[0]
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, ast.In | ast.NotIn) for op in node.ops
        ):
            key = node.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append((key.lineno, key.value))
    return found


#: A string that is a query's text (Cosmos DB SQL), and the document fields it names:
#: `c.deliverAt`, `c["deliverAt"]` (any alias of one letter).
SQL_TEXT = re.compile(r"\b(?:SELECT|WHERE|ORDER BY)\b")
SQL_FIELD = re.compile(r"\b[a-z]\.([A-Za-z_]\w*)|\b[a-z]\[\s*['\"]([^'\"]+)['\"]\s*\]")


def sql_fields(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each document field a SQL text of the module names (a string constant,
    or an f-string's literal parts)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if SQL_TEXT.search(node.value):
            found += [(node.lineno, m[1] or m[2]) for m in SQL_FIELD.finditer(node.value)]
    return found


#: Reads of the same words in another vocabulary than a stored form's, each declared for the
#: module that reads it, with the vocabulary (not exempt anywhere else).
OTHER_VOCABULARIES: dict[str, tuple[str, set[str]]] = {
    # the operators' answers (JSON), as the command line prints them
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/cli/_commands.py": (
        "the operators' API answers (JSON) it prints",
        {
            "eventId",
            "aggregateId",
            "aggregateType",
            "action",
            "reason",
            "version",
            "discardedBy",
            "subscription",
            "at",
        },
    ),
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/cli/_operations.py": (
        "the operations' API answers (JSON) it prints",
        {"createdAt", "reason"},
    ),
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/_routes/journey.py": (
        "its route's path parameters",
        {"eventId", "aggregateId", "aggregateType"},
    ),
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/_routes/quarantine.py": (
        "its routes' path parameters and request bodies",
        {"eventId", "reason"},
    ),
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/_routes/subscribers.py": (
        "its route's path parameters",
        {"subscription"},
    ),
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/_routes/failures.py": (
        "its routes' query parameters",
        {"reason"},
    ),
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/cli/_failures.py": (
        "the failures' API answers (JSON) it prints",
        {"reason", "action"},
    ),
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/_console/chart.py": (
        "the status's backlog readings (JSON)",
        {"at"},
    ),
    # the OpenAPI document's `x-events` entries, which the kit's checks compare
    "packages/cosmos-outbox-testing/src/cosmos_outbox_testing/_checks.py": (
        "the OpenAPI document's x-events entries",
        {"aggregateType", "action", "subject", "source"},
    ),
    # the event as an aggregate's `parse_event` reads it (camelCase, with its action)
    "packages/cosmos-outbox/src/cosmos_outbox/_domain.py": (
        "an event's data as `Aggregate.parse_event` reads it",
        {"action"},
    ),
    # the subscriber's own documents beside its projections, written by its projector
    "packages/cosmos-outbox/src/cosmos_outbox/subscriber/_status.py": (
        "the subscriber's bookkeeping documents (inbox, held, gaps), its projector's",
        {"version", "aggregateType", "eventId", "action", "reason", "discardedBy", "subscription"},
    ),
    "packages/cosmos-outbox/src/cosmos_outbox/subscriber/_bookkeeping.py": (
        "the subscriber's bookkeeping documents (inbox, held, gaps), its projector's",
        {"version", "eventId", "reason"},
    ),
    # W3C Trace Context: the request's header
    "packages/cosmos-outbox/src/cosmos_outbox/http/_call.py": (
        "the request's W3C trace context header",
        {"traceparent"},
    ),
    # JSON Schema's keyword, in the models' schemas
    "packages/cosmos-outbox/src/cosmos_outbox/http/_models.py": (
        "JSON Schema's keywords",
        {"properties"},
    ),
}


def stored_field_literals(root: Path = ROOT) -> list[str]:
    """`path:line name` of each read, outside the mapper, of a field name of the mapper's forms
    (`mapper_field_names`): a mapping's key read in Python, or a field a SQL text names. A name
    is exempt only in a module that owns a stored form of its own with that field (a document
    it writes: `_keys_of_stored_forms`), or where its module reads it in another vocabulary,
    declared (`OTHER_VOCABULARIES`)."""
    names = mapper_field_names()
    found = []
    for source in MAPPED_SOURCES:
        for path in sorted((root / source).rglob("*.py")):
            relative = str(path.relative_to(root))
            if "/contracts/" in relative or relative.startswith(MAPPER):
                continue
            tree = syntax.tree(path)
            exempt = _keys_of_stored_forms(tree) | OTHER_VOCABULARIES.get(relative, ("", set()))[1]
            reads = [(line, name, "") for line, name in field_reads(tree)]
            reads += [(line, name, " (in SQL)") for line, name in sql_fields(tree)]
            found += [
                f"{relative}:{line} {name}{where}"
                for line, name, where in sorted(set(reads))
                if name in names and name not in exempt
            ]
    return found


def test_the_mapper_knows_the_scheduled_state_and_the_message_properties() -> None:
    names = mapper_field_names()
    assert {"deliverAt", "releasedAt", "cancelledAt", "outboxTarget", "cloudEvents_id"} <= names
    assert not CONTAINER_KEYS & names


def test_a_stored_field_read_outside_the_mapper_is_found(tmp_path: Path) -> None:
    module = tmp_path / PACKAGE / "_relay" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "def f(document, properties):\n"
        "    due = document.get('deliverAt')\n"
        "    if 'outboxTarget' in properties:\n"
        "        return document['releasedAt'], document['id']\n"
        "WAITING = 'SELECT VALUE c.id FROM c WHERE NOT IS_DEFINED(c[\"cancelledAt\"])'\n"
    )
    # a module that owns a form of its own with `version` reads it; another does not
    owner = tmp_path / PACKAGE / "_kept" / "own.py"
    owner.parent.mkdir(parents=True)
    owner.write_text(
        "def put(store, e):\n"
        "    store.upsert({'id': e, 'partitionKey': e, 'version': 1})\n"
        "def get(d):\n"
        "    return d['version']\n"
    )
    (owner.parent / "other.py").write_text("def get(d):\n    return d['version']\n")
    assert stored_field_literals(tmp_path) == [
        f"{PACKAGE}/_kept/other.py:2 version",
        f"{PACKAGE}/_relay/m.py:2 deliverAt",
        f"{PACKAGE}/_relay/m.py:3 outboxTarget",
        f"{PACKAGE}/_relay/m.py:4 releasedAt",
        f"{PACKAGE}/_relay/m.py:5 cancelledAt (in SQL)",
    ]


def test_only_the_mapper_reads_the_stored_documents_and_messages_fields() -> None:
    """The scheduled state, a dead letter's properties, a release's form: each read in
    `cosmos_outbox._mapper` and nowhere else (issue 74)."""
    assert stored_field_literals() == []


def test_each_name_the_operators_api_exports_is_used_outside_it() -> None:
    """`cosmos_outbox.operations` exports only what a way in or an app uses (issue 74): each of
    its names is imported somewhere outside it (the ways in, the kit, an app, their tests)."""
    import subprocess

    import cosmos_outbox.operations

    room = f"{PACKAGE}/operations/"
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    used: set[str] = set()
    for relative in tracked:
        if relative.startswith(room):
            continue
        text = (ROOT / relative).read_text("utf-8")
        if "cosmos_outbox.operations" not in text:
            continue
        for node in syntax.nodes(ROOT / relative):
            if isinstance(node, ast.ImportFrom) and node.module == "cosmos_outbox.operations":
                used |= {alias.name for alias in node.names}
    assert set(cosmos_outbox.operations.__all__) - used == set()
