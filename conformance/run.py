"""``python -m conformance [--fast] [--sdk NAME] [--suite tests|samples] [--label NAME]``.

1. Finds the installed versions of azure-cosmos and azure-servicebus and downloads their
   source distributions from PyPI (``pip download --no-binary :all: --no-deps``) into
   ``.stack/conformance/`` (kept as a cache).
2. Starts the local Cosmos endpoint (free port; 8081 for test_session.py) and Service Bus
   endpoint (free AMQP port, amqps on 5671, control channel) with a throw-away CA that the
   clients trust.
3. Runs each in-scope test file of the SDK's own ``tests/`` with pytest, unchanged, with
   ``-p conformance.plugin`` and the shims in ``conformance/shims`` ahead on the path.
4. Writes per file collected / passed / failed / excluded to
   ``.stack/conformance/results-<label>.json`` and prints a table (``--markdown FILE`` too).
5. Runs the SDKs' samples (``samples/`` of the same sdists) against the same endpoints, each
   unchanged in its own subprocess (``conformance/samples.py``), and prints their table too
   (``samples-<label>.json``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from conformance import samples as sample_suite
from conformance.identity import start_identity_endpoint
from conformance.scope import FAST, KNOWN_FAILURES, SCOPE, Exclusions, load_exclusions
from conformance.tls import make_tls
from funcstack.cosmos import ADDRESS, EMULATOR_KEY, start_cosmos
from funcstack.deadlines import scaled
from funcstack.servicebus import ServiceBusEndpoint, start_servicebus

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".stack" / "conformance"
SHIMS = Path(__file__).resolve().parent / "shims"
AMQPS_PORT = 5671
#: The Cosmos DB emulator's address, which the multi-write topology fake of the SDK's
#: test_session.py hard-codes: used for runs that include that file when it is free, else any
#: free port (it is `make run`'s Cosmos port too; the fast subset never takes it).
COSMOS_EMULATOR_PORT = 8081
HARD_CODED_ADDRESS_FILES = {"test_session.py"}


def cosmos_address(port: int) -> str:
    """The Cosmos DB endpoint as the SDKs' tests and samples are given it: funcstack's address
    (127.0.0.1, IPv4-mapped), which azure-cosmos verifies against the run's CA, where it turns
    verification off for ``localhost`` (funcstack's docs/cosmos.md, Certificate)."""
    return f"https://[{ADDRESS}]:{port}/"


#: The samples' connection string: the namespace ``localhost`` (amqps on 5671, the run's CA);
#: the key is the emulator's placeholder (the endpoint checks none).
SERVICEBUS_CONNECTION_STRING = (
    "Endpoint=sb://localhost/;SharedAccessKeyName=RootManageSharedAccessKey;"
    "SharedAccessKey=SAS_KEY_VALUE"
)


@dataclass
class FileResult:
    sdk: str
    file: str
    collected: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    excluded: int = 0
    seconds: float = 0.0
    note: str = ""
    failures: list[str] = field(default_factory=list)
    passes: list[str] = field(default_factory=list)


def sdist(distribution: str) -> Path:
    """The extracted source distribution of the installed version (downloaded once)."""
    version = importlib.metadata.version(distribution)
    stem = f"{distribution.replace('-', '_')}-{version}"
    target = WORK / stem
    if (target / "tests").is_dir() and (target / "samples").is_dir():
        return target
    WORK.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-binary",
            ":all:",
            "--no-deps",
            f"{distribution}=={version}",
            "-d",
            str(WORK),
        ],
        check=True,
    )
    archive = WORK / f"{stem}.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(WORK, filter="data")
    return target


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_file(
    sdk: str,
    tests_dir: Path,
    file: str,
    env: dict[str, str],
    timeout: float,
    select: str | None = None,
) -> FileResult:
    result = FileResult(sdk=sdk, file=file)
    report = WORK / "reports" / f"{sdk}-{file.replace('/', '_').removesuffix('.py')}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    log = report.with_suffix(".log")
    started = time.monotonic()
    # -P: the tests' directory must not come first on sys.path (the shims must win);
    # -c: the SDK's tests dir is inside this repo, whose pytest settings must not apply.
    ini = WORK / "pytest.ini"
    ini.write_text("[pytest]\n")
    cmd = [
        sys.executable,
        "-P",
        "-m",
        "pytest",
        file,
        "-c",
        str(ini),
        "--rootdir",
        str(tests_dir),
        "-p",
        "conformance.plugin",
        "--import-mode=append",
        "-q",
        "-rN",
        "--no-header",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:cov",
        "--timeout",  # a test's limit (pytest-timeout), scaled as the tests' deadlines are
        f"{scaled(600):g}",
        "-o",
        "asyncio_mode=auto",
        "-W",
        "ignore::DeprecationWarning",
    ]
    if select:
        cmd += ["-k", select]
    with log.open("w") as out:
        try:
            subprocess.run(
                cmd,
                cwd=tests_dir,
                env={**env, "CONFORMANCE_SDK": sdk, "CONFORMANCE_REPORT": str(report)},
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            result.note = f"file timed out after {timeout:.0f} s"
    result.seconds = round(time.monotonic() - started, 1)
    if not report.exists():
        result.note = result.note or f"no report (collection error?), see {log}"
        return result
    data = json.loads(report.read_text())
    outcomes: dict[str, str] = data["outcomes"]
    result.excluded = len(data["excluded"])
    result.passes = sorted(n for n, o in outcomes.items() if o == "passed")
    result.passed = len(result.passes)
    result.skipped = sum(1 for o in outcomes.values() if o == "skipped")
    result.failures = sorted(n for n, o in outcomes.items() if o in ("failed", "error"))
    result.failed = len(result.failures)
    result.collected = len(outcomes) + result.excluded
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance")
    parser.add_argument("--fast", action="store_true", help="only the curated fast subset")
    parser.add_argument("--sdk", choices=sorted(SCOPE), action="append")
    parser.add_argument("--file", action="append", help="only these test files")
    parser.add_argument("--label", default="latest")
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--file-timeout", type=float, default=scaled(3600.0))
    parser.add_argument(
        "--select",
        metavar="EXPR",
        help="only the tests matching this pytest -k expression (re-measuring)",
    )
    parser.add_argument(
        "--suite",
        choices=("tests", "samples"),
        action="append",
        help="only the SDKs' own tests, or only their samples (default: both;"
        " --file alone means tests, --sample alone samples)",
    )
    parser.add_argument(
        "--sample", action="append", help="only these samples (paths under the sdist's samples/)"
    )
    parser.add_argument("--sample-timeout", type=float, default=sample_suite.DEFAULT_TIMEOUT_S)
    args = parser.parse_args(argv)
    excluded = load_exclusions()  # fail early on a malformed exclusions file
    known = load_exclusions(KNOWN_FAILURES)
    scope = FAST if args.fast else SCOPE
    sdks = args.sdk or sorted(scope)
    suites = set(args.suite or [])
    if not suites:
        suites = {"tests", "samples"}
        if args.file and not args.sample:
            suites = {"tests"}
        elif args.sample and not args.file:
            suites = {"samples"}
    if "azure-servicebus" in sdks and not _port_free(AMQPS_PORT):
        print(f"port {AMQPS_PORT} (amqps) is in use: another conformance run?", file=sys.stderr)
        return 2
    dirs = {sdk: sdist(sdk) / "tests" for sdk in sdks}
    # A CA of this run's own: a second run (Cosmos only: amqps is one fixed port) must not
    # replace the bundle that this run's clients verify against.
    WORK.mkdir(parents=True, exist_ok=True)
    tls_dir = Path(tempfile.mkdtemp(prefix="tls-", dir=WORK))
    tls = make_tls(tls_dir)
    # the endpoints' logs of this run (per label: a Cosmos-only run may run beside another,
    # and a sample's verdict reads what the endpoints logged while it ran)
    logs = WORK / "logs" / args.label
    logs.mkdir(parents=True, exist_ok=True)
    selected = {f for sdk in sdks for f in scope[sdk] if not args.file or f in args.file}
    if "tests" not in suites:
        selected = set()
    cosmos_port = 0
    if selected & HARD_CODED_ADDRESS_FILES:
        cosmos_port = COSMOS_EMULATOR_PORT if _port_free(COSMOS_EMULATOR_PORT) else 0
    if selected & HARD_CODED_ADDRESS_FILES and not cosmos_port:
        print(
            f"port {COSMOS_EMULATOR_PORT} is in use (make run?): the SDK tests that hard-code "
            "the emulator's address will fail",
            file=sys.stderr,
        )
    cosmos = None
    servicebus = None
    results: list[FileResult] = []
    sample_results: list[sample_suite.SampleResult] = []
    try:
        cosmos = start_cosmos(
            log_path=logs / "cosmos.log", tls=(tls.cert, tls.key), port=cosmos_port
        )
        if "azure-servicebus" in sdks:
            servicebus = start_servicebus(
                log_path=logs / "servicebus.log",
                tls=(AMQPS_PORT, tls.cert, tls.key),
                control=True,
                log_level="WARNING",
            )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(SHIMS), str(ROOT)]),
            "ACCOUNT_HOST": cosmos_address(cosmos.port),
            "ACCOUNT_KEY": EMULATOR_KEY,
            "CONFORMANCE_CA_BUNDLE": str(tls.bundle),
            "REQUESTS_CA_BUNDLE": str(tls.bundle),
            "SSL_CERT_FILE": str(tls.bundle),
            "CONFORMANCE_SERVICEBUS_CONTROL": (
                f"127.0.0.1:{servicebus.control_port if servicebus else 0}"
            ),
            "SERVICEBUS_ENDPOINT_SUFFIX": "",
        }
        for sdk in sdks:
            for file in scope[sdk] if "tests" in suites else []:
                if args.file and file not in args.file:
                    continue
                result = run_file(sdk, dirs[sdk], file, env, args.file_timeout, args.select)
                print(_row(result), flush=True)
                results.append(result)
        if "samples" in suites:
            sample_results = _run_samples(
                sdks,
                args,
                excluded,
                cosmos_port=cosmos.port,
                tls_bundle=tls.bundle,
                servicebus=servicebus,
                endpoint_logs=[logs / "cosmos.log"]
                + ([logs / "servicebus.log"] if servicebus is not None else []),
            )
    except KeyboardInterrupt:
        # Ctrl-C reaches the pytest child too (one process group); stop the endpoints, no verdict
        print(
            f"\nconformance: interrupted after {len(results)} file(s); endpoints stopped",
            file=sys.stderr,
        )
        return 130
    finally:
        if servicebus is not None:
            servicebus.stop()
        if cosmos is not None:
            cosmos.stop()
        shutil.rmtree(tls_dir, ignore_errors=True)
    table = ""
    if "tests" in suites:
        out = WORK / f"results-{args.label}.json"
        out.write_text(json.dumps([r.__dict__ for r in results], indent=1))
        table = "The SDKs' own tests\n\n" + markdown(results)
    if "samples" in suites:
        (WORK / f"samples-{args.label}.json").write_text(sample_suite.to_json(sample_results))
        table += (
            ("\n" if table else "")
            + "The SDKs' samples\n\n"
            + sample_suite.markdown(sample_results, known)
        )
    print(table)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table)
    return verdict(results, known, sample_suite.verdict(sample_results, known), sample_results)


def _run_samples(
    sdks: list[str],
    args: argparse.Namespace,
    excluded: Exclusions,
    *,
    cosmos_port: int,
    tls_bundle: Path,
    servicebus: ServiceBusEndpoint | None,
    endpoint_logs: list[Path],
) -> list[sample_suite.SampleResult]:
    identity = start_identity_endpoint()
    try:
        ctx = sample_suite.SampleContext(
            cosmos_endpoint=cosmos_address(cosmos_port),
            cosmos_key=EMULATOR_KEY,
            servicebus_namespace="localhost",
            servicebus_connection_string=SERVICEBUS_CONNECTION_STRING,
            servicebus_control=(
                ("127.0.0.1", int(servicebus.control_port))
                if servicebus is not None and servicebus.control_port
                else None
            ),
            ca_bundle=tls_bundle,
            identity=identity,
            endpoint_logs=endpoint_logs,
            work=WORK,
            timeout=args.sample_timeout,
        )
        out: list[sample_suite.SampleResult] = []
        for sdk in sdks:
            samples_dir = sdist(sdk) / "samples"
            names = sample_suite.discover(sdk, samples_dir)
            if args.fast:
                names = [n for n in names if n in sample_suite.FAST_SAMPLES.get(sdk, [])]
            if args.sample:
                names = [n for n in names if n in args.sample]
            out += sample_suite.run_samples(
                sdk, samples_dir, names, ctx, excluded, on_result=_print_sample
            )
        return out
    finally:
        identity.stop()


def _print_sample(r: sample_suite.SampleResult) -> None:
    print(f"| {r.sdk} | sample {r.sample} | {r.outcome} | {r.seconds} | {r.reason} |", flush=True)


def verdict(
    results: list[FileResult],
    known: Exclusions,
    sample_problems: list[str] | None = None,
    sample_results: list[sample_suite.SampleResult] | None = None,
) -> int:
    """0 when every failure is a listed gap (known-failures.txt) and every listed gap that ran
    still fails, for tests and samples; 1 otherwise, naming each regression and closed gap."""
    problems: list[str] = list(sample_problems or [])
    known_count = 0
    for r in results:
        if r.note:
            problems.append(f"{r.sdk} {r.file}: {r.note}")
        for nodeid in r.failures:
            if known.reason(r.sdk, nodeid) is None:
                problems.append(f"{r.sdk} {nodeid}: failed (not a known gap: a regression?)")
            else:
                known_count += 1
        for nodeid in r.passes:
            if known.reason(r.sdk, nodeid) is not None:
                problems.append(
                    f"{r.sdk} {nodeid}: passes now; remove it from conformance/known-failures.txt"
                )
    total = sum(r.passed for r in results)
    line = f"conformance: {total} passed, {known_count} known gaps failed as listed"
    if sample_results:
        for sdk, counts in sample_suite.summary(sample_results, known).items():
            line += (
                f"; {sdk} samples: {counts.get('passed', 0)} passed, "
                f"{counts.get('known gap', 0)} known gaps, "
                f"{counts.get('out of scope', 0)} out of scope"
            )
    print(f"{line}; {len(problems)} problems")
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    return 1 if problems else 0


def _row(r: FileResult) -> str:
    return (
        f"| {r.sdk} | {r.file} | {r.collected} | {r.passed} | {r.failed} | {r.skipped} | "
        f"{r.excluded} | {r.seconds} | {r.note} |"
    )


def markdown(results: list[FileResult]) -> str:
    lines = [
        "| SDK | test file | collected | passed | failed | skipped | excluded | s | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(r) for r in results]
    return "\n".join(lines) + "\n"
