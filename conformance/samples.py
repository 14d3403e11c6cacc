"""The SDKs' samples as a second conformance suite, beside their own tests.

The samples ship in the same source distributions as the tests (``samples/``). Each sample
script runs **unchanged**, in its own subprocess (``python <script>`` in the script's folder,
so its own ``import config`` works), with a time limit, and with its environment pointed at
the local endpoints of the run:

- Cosmos DB: ``ACCOUNT_HOST`` / ``ACCOUNT_URI`` / ``COSMOS_ACCOUNT_URL`` / ``CONN_STR`` name the
  local endpoint, ``ACCOUNT_KEY`` / ``COSMOS_CREDENTIAL`` its key, and ``COSMOS_DATABASE`` /
  ``COSMOS_CONTAINER`` / ``COSMOS_CONTAINER_MH`` / ``DATABASE_NAME`` names of the sample's own
  (nothing is shared between samples);
- Service Bus: ``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE`` (``localhost``: amqps on 5671) and
  ``SERVICEBUS_CONNECTION_STR``, with a queue, a session queue, a topic and a subscription of
  the sample's own, created over the endpoint's control channel before it starts;
- Azure AD: ``IDENTITY_ENDPOINT`` / ``IDENTITY_HEADER`` name a local managed-identity token
  endpoint (``conformance/identity.py``), so ``DefaultAzureCredential`` gets a token as on App
  Service; every other credential variable (``AZURE_*``, ``MSI_*``, ...) is removed;
- TLS: the run's throw-away CA, through ``SSL_CERT_FILE`` / ``REQUESTS_CA_BUNDLE`` and, for
  the AMQP transport, ``conformance/sample_shims/sitecustomize.py``.

A sample **passes** when it exits 0 within its time limit, its output has no line reporting an
error (``error_lines``: samples catch errors and print them, then exit 0), and the endpoints'
logs got no failure while it ran (``ENDPOINT_FAILURE``: a traceback, a dropped connection).
Classification is the tests': out of scope with a reason in ``excluded.txt``, known gaps with
what differs in ``known-failures.txt`` (sections ``[<sdk> samples]``, globs over the sample's
path under ``samples/``); any other failure, and a listed gap that passes, fails the run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from conformance.identity import IdentityEndpoint
from conformance.scope import Exclusions
from funcstack.deadlines import scaled
from funcstack.servicebus import control_request as servicebus_control

SAMPLE_SHIMS = Path(__file__).resolve().parent / "sample_shims"

#: Per SDK: modules under ``samples/`` that other samples import (not samples themselves).
NOT_SAMPLES: dict[str, set[str]] = {
    "azure-cosmos": {
        "config.py",
        "vector_test_data.py",
        "MultiMasterOperations/Configurations.py",
        "MultiMasterOperations/ConflictWorker.py",
        "MultiMasterOperations/MultiMasterScenario.py",
        "MultiMasterOperations/Worker.py",
    },
    "azure-servicebus": set(),
}

#: What ``make test`` runs (``--fast``): quick, deterministic samples (about a second each)
#: that cover what this suite closed: offers and the completed container settings, an error a
#: sample provokes by design, and the async client's detach after its session's end.
FAST_SAMPLES: dict[str, list[str]] = {
    "azure-cosmos": [
        "autoscale_throughput_management_async.py",
        "container_management.py",
        "database_management_async.py",
        "transactional_batch.py",
    ],
    "azure-servicebus": [
        "sync_samples/session_send_receive.py",
        "async_samples/list_sessions_async.py",
        "async_samples/receive_deferred_message_queue_async.py",
    ],
}

#: The longest samples sleep past lock durations by design (auto_lock_renew_async: 8 min): a
#: sample's limit, scaled with the tests' deadlines (TEST_DEADLINE_SCALE) for a slower machine.
DEFAULT_TIMEOUT_S = scaled(900.0)

#: A line of a sample's output that reports an error. Samples catch the SDK's exceptions and
#: print them, then exit 0: ``run_sample has caught an error. ...``, ``Error: ...``,
#: ``Database throughput error: ...``, ``Error in reading item ...``, ``Bad Request exception
#: occurred: ...``, ``Failed to create user ...``, ``A container with id 'x' does not exist``,
#: ``Entity doesn't exist``; a traceback printed from a thread or a logger counts too, and so
#: does a credential's warning (``ManagedIdentityCredential.get_token_info failed: ...``).
ERROR_LINE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\bcaught an error\b"
    r"|\berror\b\s*:"
    r"|^\s*error\b"
    r"|\bexception\b\s*:|\bexception occurred\b"
    r"|^\s*failed\b|\bfailed\s*:"
    r"|\b(?:does not|doesn't) exist\b"
    r"|\bnot found\b"
    r"|\bbad request\b"
    r"|(?<!created or )\balready exists\b",  # every sample starts from names no one else used
    re.IGNORECASE,
)
#: ...unless the line says the error was the point (``Failed as expected.``, ``403 error
#: assertion success``, ``Expected error when using both: ...``).
EXPECTED_LINE = re.compile(
    r"\b(?:as|is) expected\b|^\s*expected error\b|\bassertion success\b", re.IGNORECASE
)


@dataclass(frozen=True)
class DesignedError:
    """An error a sample provokes on purpose: a regular expression over one (stripped) line
    of its output, and why it is by design."""

    line: str
    why: str


_BATCH_412 = DesignedError(
    r"^Error operation: \('replace', \('replace_item'.*'statusCode': 412",
    "the sample's own comment: its if-match replace, after a replace of the same item in the "
    "same batch, fails with 412 and the whole batch is rolled back",
)
_DATABASE_TWICE = DesignedError(
    r"^A database with id '[^']+' already exists$",
    "the sample creates its database twice on purpose (steps 2 and 2.8, the second with "
    "autoscale): the second answers 409",
)

#: Per SDK and sample: the errors it provokes on purpose. Such a line is not a failure, and
#: the sample must print it: when it does not, the endpoint did not refuse what the service
#: refuses, and the sample fails.
DESIGNED_ERRORS: dict[str, dict[str, list[DesignedError]]] = {
    "azure-cosmos": {
        "transactional_batch.py": [_BATCH_412],
        "transactional_batch_async.py": [_BATCH_412],
        "database_management.py": [_DATABASE_TWICE],
        "database_management_async.py": [_DATABASE_TWICE],
    },
}

#: Lines in an endpoint's log that mean it failed while a sample ran: a Python traceback or
#: a dropped connection (Service Bus), a stack trace (Cosmos DB: ``cosmos local...: <stack>``).
ENDPOINT_FAILURE = re.compile(
    r"Traceback \(most recent call last\)|connection failed"
    r"|^cosmos local[^:]*:",
    re.MULTILINE,
)

#: The samples' queues and subscriptions lock messages for 30 s, as the SDK's own test
#: resources do (auto_lock_renew's failure demonstration renews every 40 s, "greater than the
#: service side message lock duration").
LOCK_DURATION = "PT30S"
#: Service Bus subscription properties a sample needs beyond those (emulator Config.json
#: keys): listing sessions is about session-enabled entities.
SUBSCRIPTION_PROPERTIES: dict[str, dict[str, object]] = {
    "sync_samples/list_sessions.py": {"RequiresSession": True},
    "async_samples/list_sessions_async.py": {"RequiresSession": True},
}

#: Variables that would pick another credential than the local managed identity, or another
#: endpoint than the run's (a developer's own settings): not passed to the samples.
CREDENTIAL_VARIABLES = re.compile(r"^(AZURE_|MSI_|IDENTITY_|IMDS_|ACCOUNT_|COSMOS_|SERVICEBUS_)")


@dataclass
class SampleResult:
    sdk: str
    sample: str
    outcome: str = "failed"  # passed | failed | excluded
    seconds: float = 0.0
    reason: str = ""  # why it failed (first error line, exit code, timeout) or is excluded
    log: str = ""


@dataclass
class SampleContext:
    """What every sample of a run shares: the endpoints' addresses and logs, TLS, identity."""

    cosmos_endpoint: str
    cosmos_key: str
    servicebus_namespace: str
    servicebus_connection_string: str
    servicebus_control: tuple[str, int] | None
    ca_bundle: Path
    identity: IdentityEndpoint
    endpoint_logs: list[Path]
    work: Path
    timeout: float = DEFAULT_TIMEOUT_S
    counter: Iterator[int] = field(default_factory=lambda: iter(range(1, 1_000_000)))


def discover(sdk: str, samples_dir: Path) -> list[str]:
    """Every sample script of an SDK's sdist (paths relative to ``samples/``), sorted."""
    found = sorted(p.relative_to(samples_dir).as_posix() for p in samples_dir.rglob("*.py"))
    return [
        s
        for s in found
        if s not in NOT_SAMPLES.get(sdk, set()) and not s.startswith("__") and "/__" not in s
    ]


def designed_errors(sdk: str, sample: str) -> list[re.Pattern[str]]:
    return [re.compile(d.line) for d in DESIGNED_ERRORS.get(sdk, {}).get(sample, [])]


def error_lines(output: str, designed: list[re.Pattern[str]] | None = None) -> list[str]:
    """The lines of a sample's output that report an error it caught (see ERROR_LINE), less
    the ones it provokes on purpose (``designed``)."""
    out = []
    for raw in output.splitlines():
        line = raw.strip()
        if not ERROR_LINE.search(line) or EXPECTED_LINE.search(line):
            continue
        if any(p.search(line) for p in designed or []):
            continue
        out.append(line)
    return out


def missing_designed_errors(output: str, designed: list[re.Pattern[str]]) -> list[str]:
    lines = [line.strip() for line in output.splitlines()]
    return [p.pattern for p in designed if not any(p.search(line) for line in lines)]


def _base_env(ctx: SampleContext) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not CREDENTIAL_VARIABLES.match(k)}
    env.update(
        {
            "PYTHONPATH": str(SAMPLE_SHIMS),
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "CONFORMANCE_CA_BUNDLE": str(ctx.ca_bundle),
            "REQUESTS_CA_BUNDLE": str(ctx.ca_bundle),
            "SSL_CERT_FILE": str(ctx.ca_bundle),
            **ctx.identity.environment,
        }
    )
    return env


def cosmos_env(ctx: SampleContext, prefix: str) -> dict[str, str]:
    endpoint = ctx.cosmos_endpoint
    return {
        "ACCOUNT_HOST": endpoint,
        "ACCOUNT_URI": endpoint,
        "COSMOS_ACCOUNT_URL": endpoint,
        "ACCOUNT_KEY": ctx.cosmos_key,
        "COSMOS_CREDENTIAL": ctx.cosmos_key,
        "CONN_STR": f"AccountEndpoint={endpoint};AccountKey={ctx.cosmos_key};",
        "COSMOS_DATABASE": f"{prefix}-db",
        "DATABASE_NAME": f"{prefix}-db",
        "COSMOS_CONTAINER": f"{prefix}-container",
        "COSMOS_CONTAINER_MH": f"{prefix}-container-mh",
        # read by the Entra ID samples' ClientSecretCredential, which they build but never use
        # (they authenticate with DefaultAzureCredential): well-formed, never sent anywhere
        "TENANT_ID": "00000000-0000-0000-0000-000000000000",
        "CLIENT_ID": "00000000-0000-0000-0000-000000000000",
        "CLIENT_SECRET": "unused",
    }


def servicebus_env(ctx: SampleContext, prefix: str, sample: str) -> dict[str, str]:
    names = {
        "queue": f"{prefix}-q",
        "session_queue": f"{prefix}-sq",
        "topic": f"{prefix}-t",
        "subscription": f"{prefix}-s",
    }
    if ctx.servicebus_control is not None:
        host, port = ctx.servicebus_control
        lock = {"LockDuration": LOCK_DURATION}
        servicebus_control(
            host, port, {"op": "create-queue", "name": names["queue"], "properties": lock}
        )
        servicebus_control(
            host,
            port,
            {
                "op": "create-queue",
                "name": names["session_queue"],
                "properties": {**lock, "RequiresSession": True},
            },
        )
        servicebus_control(
            host, port, {"op": "create-topic", "name": names["topic"], "properties": {}}
        )
        servicebus_control(
            host,
            port,
            {
                "op": "create-subscription",
                "topic": names["topic"],
                "name": names["subscription"],
                "properties": {**lock, **SUBSCRIPTION_PROPERTIES.get(sample, {})},
            },
        )
    return {
        "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": ctx.servicebus_namespace,
        "SERVICEBUS_CONNECTION_STR": ctx.servicebus_connection_string,
        "SERVICEBUS_QUEUE_NAME": names["queue"],
        "SERVICEBUS_SESSION_QUEUE_NAME": names["session_queue"],
        "SERVICEBUS_TOPIC_NAME": names["topic"],
        "SERVICEBUS_SUBSCRIPTION_NAME": names["subscription"],
        "SERVICEBUS_SESSION_ID": f"{prefix}-session",
        "SERVICEBUS_SAS_POLICY": "RootManageSharedAccessKey",
        "SERVICEBUS_SAS_KEY": "SAS_KEY_VALUE",
    }


def _log_sizes(paths: list[Path]) -> list[int]:
    return [p.stat().st_size if p.exists() else 0 for p in paths]


def _log_growth(paths: list[Path], sizes: list[int]) -> str:
    out = []
    for path, size in zip(paths, sizes, strict=True):
        if path.exists():
            with path.open("rb") as f:
                f.seek(size)
                out.append(f.read().decode("utf-8", "replace"))
    return "".join(out)


def run_sample(sdk: str, samples_dir: Path, sample: str, ctx: SampleContext) -> SampleResult:
    result = SampleResult(sdk=sdk, sample=sample)
    script = samples_dir / sample
    prefix = f"s{next(ctx.counter)}-{uuid.uuid4().hex[:6]}"
    log = ctx.work / "samples" / sdk / (sample.replace("/", "_").removesuffix(".py") + ".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    result.log = str(log)
    env = _base_env(ctx)
    sizes = _log_sizes(ctx.endpoint_logs)
    started = time.monotonic()
    timed_out = False
    try:
        env.update(
            cosmos_env(ctx, prefix)
            if sdk == "azure-cosmos"
            else servicebus_env(ctx, prefix, sample)
        )
        with log.open("w", encoding="utf-8") as out:
            try:
                proc = subprocess.run(
                    [sys.executable, script.name],
                    cwd=script.parent,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=ctx.timeout,
                    check=False,
                )
                code: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                timed_out = True
                code = None
    except (OSError, RuntimeError) as exc:
        result.reason = f"could not start: {exc}"
        return result
    result.seconds = round(time.monotonic() - started, 1)
    output = log.read_text(encoding="utf-8", errors="replace")
    endpoint = ENDPOINT_FAILURE.findall(_log_growth(ctx.endpoint_logs, sizes))
    designed = designed_errors(sdk, sample)
    caught = error_lines(output, designed)
    missing = missing_designed_errors(output, designed)
    if timed_out:
        result.reason = f"timed out after {ctx.timeout:.0f} s"
    elif code != 0:
        last = [line for line in output.splitlines() if line.strip()][-1:] or [""]
        result.reason = f"exit {code}: {last[0].strip()[:200]}"
    elif caught:
        result.reason = f"printed an error: {caught[0][:200]}"
    elif missing:
        result.reason = f"did not print the error it provokes on purpose: /{missing[0]}/"
    elif endpoint:
        result.reason = f"endpoint log: {endpoint[0]}"
    else:
        result.outcome = "passed"
    return result


def run_samples(
    sdk: str,
    samples_dir: Path,
    samples: list[str],
    ctx: SampleContext,
    excluded: Exclusions,
    on_result: Callable[[SampleResult], None] | None = None,
) -> list[SampleResult]:
    results: list[SampleResult] = []
    section = f"{sdk} samples"
    for sample in samples:
        why = excluded.reason(section, sample)
        if why is not None:
            result = SampleResult(sdk=sdk, sample=sample, outcome="excluded", reason=why)
        else:
            result = run_sample(sdk, samples_dir, sample, ctx)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results


def classify(result: SampleResult, known: Exclusions) -> tuple[str, str]:
    """(status, reason) for the table: passed, out of scope, known gap, FAILED, GAP CLOSED."""
    gap = known.reason(f"{result.sdk} samples", result.sample)
    if result.outcome == "excluded":
        return "out of scope", result.reason
    if result.outcome == "passed":
        if gap:
            return "GAP CLOSED (remove from known-failures.txt)", gap
        designed = DESIGNED_ERRORS.get(result.sdk, {}).get(result.sample, [])
        return "passed", "; ".join(f"prints an error by design: {d.why}" for d in designed)
    if gap:
        return "known gap", gap
    return "FAILED", result.reason


def verdict(results: list[SampleResult], known: Exclusions) -> list[str]:
    """The problems: unlisted failures and listed gaps that pass."""
    problems = []
    for r in results:
        status, _ = classify(r, known)
        if status == "FAILED":
            problems.append(f"{r.sdk} sample {r.sample}: {r.reason} (see {r.log})")
        elif status.startswith("GAP CLOSED"):
            problems.append(
                f"{r.sdk} sample {r.sample}: passes now; remove it from "
                "conformance/known-failures.txt"
            )
    return problems


def summary(results: list[SampleResult], known: Exclusions) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for r in results:
        status, _ = classify(r, known)
        key = status.split(" (")[0]
        per = counts.setdefault(r.sdk, {})
        per[key] = per.get(key, 0) + 1
    return counts


def markdown(results: list[SampleResult], known: Exclusions) -> str:
    lines = ["| SDK | sample | result | s | reason |", "|---|---|---|---|---|"]
    for r in results:
        status, reason = classify(r, known)
        lines.append(
            f"| {r.sdk} | {r.sample} | {status} | {r.seconds} | {reason.replace('|', '/')} |"
        )
    lines.append("")
    lines.append("| SDK | passed | known gap | out of scope | failed |")
    lines.append("|---|---|---|---|---|")
    for sdk, counts in summary(results, known).items():
        failed = counts.get("FAILED", 0) + counts.get("GAP CLOSED", 0)
        lines.append(
            f"| {sdk} | {counts.get('passed', 0)} | {counts.get('known gap', 0)} | "
            f"{counts.get('out of scope', 0)} | {failed} |"
        )
    return "\n".join(lines) + "\n"


def to_json(results: list[SampleResult]) -> str:
    return json.dumps([r.__dict__ for r in results], indent=1)
