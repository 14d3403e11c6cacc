"""The samples suite's rules: what counts as a sample that failed although it exited 0, how a
sample is classified (passed / known gap / out of scope) and what fails the run; and the
managed-identity stand-in the Azure AD samples get their tokens from."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.identity import ManagedIdentityCredential

from conformance.identity import IdentityEndpoint, start_identity_endpoint
from conformance.samples import (
    FAST_SAMPLES,
    NOT_SAMPLES,
    SampleResult,
    classify,
    designed_errors,
    discover,
    error_lines,
    missing_designed_errors,
    verdict,
)
from conformance.scope import EXCLUDED, KNOWN_FAILURES, load_exclusions
from funcstack.deadlines import LOOPBACK

# ----------------------------------------------------------------- the error-line rule


@pytest.mark.parametrize(
    "line",
    [
        "run_sample has caught an error. (BadRequest) no route",
        "Error: (NotFound) Entity with the specified id does not exist in the system.",
        "Database throughput error: (BadRequest) no route",
        "Error updating autoscale throughput: (BadRequest) no route",
        "Error in reading item with id 'x'.",
        "Bad Request exception occurred:  (BadRequest) Unsupported ORDER BY clause.",
        "Exception: Authentication failed",
        "Failed to create user. Status code:400",
        "ManagedIdentityCredential.get_token_info failed: connection refused",
        "A container with id 'c1' does not exist",
        "Entity doesn't exist",
        "Entity already exists",
        "Traceback (most recent call last):",
        # a parser's message that starts with "Expected" is no expected error
        'Bad Request exception occurred:  (BadRequest) Expected "!=", "%", "&", "(", or "}"',
    ],
)
def test_a_line_reporting_a_caught_error_counts(line: str) -> None:
    assert error_lines(f"step 1\n{line}\nrun_sample done\n") == [line]


@pytest.mark.parametrize(
    "line",
    [
        "Failed as expected.",
        "403 error assertion success",
        "Expected error when using both: 'feed_range' and 'partition_key' are exclusive",
        "Messages cannot be settled if they have timed out. (This is expected)",
        "Database 'read_items_sync_db' created or already exists.",
        "Filter predicate match failure will result in BadRequestException.",
        "Intentionally failed to renew lock on message due to None",
        "--- 1. Basic read_items usage with a non-existent item ---",
    ],
)
def test_a_line_that_describes_an_error_on_purpose_does_not(line: str) -> None:
    assert error_lines(line) == []


def test_an_error_the_sample_provokes_by_design_is_required_not_counted() -> None:
    designed = designed_errors("azure-cosmos", "transactional_batch.py")
    provoked = (
        "Error operation: ('replace', ('replace_item', {'id': 'replace_item'}), {}), "
        "error operation response: {'statusCode': 412, 'requestCharge': 1}"
    )
    assert error_lines(provoked, designed) == []
    assert missing_designed_errors(provoked, designed) == []
    # the batch went through: the endpoint did not refuse what the service refuses
    assert missing_designed_errors("Results for the batch operations: [...]", designed)
    # another error still counts
    assert error_lines("Error: (BadRequest) no route", designed)


# ----------------------------------------------------------------- classification and verdict


def _known(tmp_path: Path) -> Path:
    path = tmp_path / "known.txt"
    path.write_text("[sdk samples]\ngap_*.py | differs\n", encoding="utf-8")
    return path


def test_only_listed_samples_may_fail_and_a_listed_one_that_passes_fails_the_run(
    tmp_path: Path,
) -> None:
    known = load_exclusions(_known(tmp_path))
    results = [
        SampleResult("sdk", "fine.py", outcome="passed"),
        SampleResult("sdk", "gap_one.py", outcome="failed", reason="exit 1"),
        SampleResult("sdk", "far.py", outcome="excluded", reason="management plane"),
    ]
    assert [classify(r, known)[0] for r in results] == ["passed", "known gap", "out of scope"]
    assert verdict(results, known) == []

    regression = SampleResult("sdk", "fine.py", outcome="failed", reason="printed an error")
    closed = SampleResult("sdk", "gap_one.py", outcome="passed")
    assert len(verdict([regression, closed], known)) == 2


def test_the_committed_sample_lists_parse_and_every_line_has_a_reason() -> None:
    for path in (EXCLUDED, KNOWN_FAILURES):
        rules = load_exclusions(path).rules
        assert rules["azure-cosmos samples"]
    assert load_exclusions(EXCLUDED).rules["azure-servicebus samples"]


def test_the_fast_samples_are_in_scope_and_not_known_gaps() -> None:
    excluded, known = load_exclusions(EXCLUDED), load_exclusions(KNOWN_FAILURES)
    for sdk, samples in FAST_SAMPLES.items():
        for sample in samples:
            assert excluded.reason(f"{sdk} samples", sample) is None, sample
            assert known.reason(f"{sdk} samples", sample) is None, sample


def test_modules_the_samples_import_are_not_samples(tmp_path: Path) -> None:
    for name in (
        "config.py",
        "examples.py",
        "MultiMasterOperations/Worker.py",
        "MultiMasterOperations/Program.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    assert "config.py" in NOT_SAMPLES["azure-cosmos"]
    assert discover("azure-cosmos", tmp_path) == ["MultiMasterOperations/Program.py", "examples.py"]


# ----------------------------------------------------------------- managed identity stand-in


@pytest.fixture
def identity() -> Iterator[IdentityEndpoint]:
    endpoint = start_identity_endpoint()
    try:
        yield endpoint
    finally:
        endpoint.stop()


def test_the_token_endpoint_answers_as_app_services(identity: IdentityEndpoint) -> None:
    url = f"{identity.url}?api-version=2019-08-01&resource=https://servicebus.azure.net"
    request = urllib.request.Request(  # noqa: S310 - local
        url, headers={"X-IDENTITY-HEADER": identity.secret}
    )
    with urllib.request.urlopen(request, timeout=LOOPBACK) as response:  # noqa: S310 - local
        body = json.loads(response.read())
    assert body["resource"] == "https://servicebus.azure.net"
    assert body["token_type"] == "Bearer"
    assert int(body["expires_on"]) > 0
    assert body["access_token"].count(".") == 2  # a JWT

    with pytest.raises(urllib.error.HTTPError) as refused:  # no header: refused
        urllib.request.urlopen(url, timeout=LOOPBACK)  # noqa: S310 - local
    assert refused.value.code == 401


def test_managed_identity_credential_gets_its_token_there(
    identity: IdentityEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in identity.environment.items():
        monkeypatch.setenv(name, value)
    token = ManagedIdentityCredential().get_token("https://cosmos.azure.com/.default")
    assert token.token.count(".") == 2
    assert identity.requests == ["https://cosmos.azure.com"]
