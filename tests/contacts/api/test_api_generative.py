"""Generative tests of the whole HTTP API with schemathesis (its Python API, inside pytest):
cases generated from the OpenAPI document the running app serves, positive and negative data,
sent to the app hosted by the local Functions host on the local stack (or, with `--deployed`,
to the deployed app, its key sent with every case: tools/target.py), every check on.

Deliberate exceptions, each configured here and nowhere else:
- `ignored_auth` is off: the local host does not enforce function keys (Azure does), so a
  request without `x-functions-key` is served locally; that check would only test the host
  (a deployed app is sent its key with every case, as a client sends it). For the same reason
  no key header is generated (`with_security_parameters=False`).
- `positive_data_acceptance` is skipped for a request that carries a continuation token (a
  list's, in its query or header; a re-drive's, in its body):
  a token is valid only when this API issued it (it is sealed), which no schema can state, so
  a schema-valid made-up token is rightly refused with 400. Negative tokens are still checked.
- `positive_data_acceptance` is skipped for a write whose `Idempotency-Key` this run already
  sent to the same operation (quoted or bare: one key): a key names one request, so the same
  key with another (valid) body is rightly refused with 422, which no schema can state.
  Hypothesis draws short keys (`"0"`) again and again; a fresh key is still checked.
- `negative_data_rejection` is skipped when a query parameter reaches the app as nothing: sent
  with no value (`?pageSize=`, also as a list of one empty string) or not written at all (an
  empty list, `None`). The Functions host drops empty query values before the app sees them
  (locally too), so the request is the one without that parameter, which may well be valid.
- Header values are sent UTF-8 encoded (the HTTP client would send latin-1). The Functions host
  (Kestrel) decodes header values as UTF-8 and refuses other bytes itself, with a bodyless 400,
  before the app (the local host does the same:
  packages/funcstack/tests/functions_host/test_parity.py), so only UTF-8 headers reach the app
  and test it.

Speed only (`_memoize_regex_strategies`): Hypothesis builds a regex's strategy anew each time it
is asked, character class by character class, and schemathesis asks for the same few patterns
hundreds of times (the text fields' patterns have classes of ~150,000 code points: ~0.5 s a
build). The built strategy is a pure function of the pattern, its flags and the alphabet, so
it is kept and handed out again, and so is each character class's (the coverage phase spells a
field's length bounds into its pattern: a pattern per bound, the same classes); the cases
generated are the same; so is `_memoize_parsed_regexes`: Hypothesis' own strategy cache misses
whenever the alphabet is a new (equal) object, and each miss parsed the 6,400-character text
rule again before reaching the kept strategy (~3 s of the job's CPU).

Also speed only, the cases, checks and requests the same:
- One connection pool: schemathesis opens a session and a connection for each of the ~2,900
  cases unless it is handed a session (`http`); its own runner hands it one, its
  `ManagedCookiesSession` (no default headers, each response's cookies dropped), and so does
  this module: each request's bytes are the same (head and body, compared on a recording
  server), only sent over a kept-alive connection, which the host keeps as Kestrel does.
- The collector: the objects the imports and the collection built (the coverage phase's
  strategies, Hypothesis' caches) are set aside from the cyclic garbage collector
  (`gc.freeze`) until the module's tests are done: each full collection walked them all again
  (16 of them, ~3 s of CPU).
- The coverage phase's slow draws kept (`generative_draws.json`, `_replay_kept_draws`): a text
  field's boundary lengths (1, 99-101, 199-200, 249-250, 499-500, 511-512 characters) are each
  one Hypothesis search, seeded (schemathesis draws every coverage value with seed 0), about 65
  tries of ~270 characters drawn one at a time until the length filter passes: ~15 s of the
  collection's ~22 s of CPU. The value is a function of the pattern, the length bounds and the
  versions of Hypothesis, schemathesis and Python, so the value each gave is kept in the file,
  under its pattern and bounds (the versions named), and handed out again, checked against the
  pattern and the bounds. With the versions the file names, every draw and every one of the
  2,514 coverage cases is the same, in the same order (compared with the file and without it,
  two hash seeds); with others, these values are still the same search's, as those versions
  drew them. A slow draw the file does not hold (a new pattern or bound) is made and named in
  a warning; `GENERATIVE_KEEP_DRAWS=1 .venv/bin/python -m pytest -p no:cacheprovider
  --collect-only tests/contacts/api/test_api_generative.py` draws each anew and writes the file.
"""

from __future__ import annotations

import atexit
import functools
import gc
import hashlib
import importlib.metadata
import json
import os
import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CheckFunction
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from cosmos_outbox.http import HttpProblemError, parse_key
from funcstack.deadlines import SHORT
from tests.conftest import SESSION_STACK_SETTINGS
from tests.contacts.openapi import openapi_document
from tools.httpclient import Client
from tools.target import Target

pytestmark = pytest.mark.integration
#: schemathesis' pytest plugin (it turns ``@generated.parametrize()`` into tests), asked for here
#: when pytest has not loaded it: `make` keeps it out of every other pytest process (the
#: Makefile's `-p no:schemathesis`), so this module asks for it; a plain `python -m pytest` loads
#: it by its entry point, and a second registration of the same module under this name was
#: refused ("Plugin already registered under a different name": every run of tests/contacts/api
#: stopped at collection). Imported only by pytest's loading of it (the imports above do not).
PLUGIN = "schemathesis.pytest.plugin"
pytest_plugins = [] if PLUGIN in sys.modules else [PLUGIN]


def _memoize_regex_strategies() -> None:
    """Keep each regex strategy Hypothesis builds (see the module's docstring). Hypothesis'
    internals may move: then nothing is patched and the tests run as they are, only slower."""
    from hypothesis.strategies._internal import regex as hypothesis_regex

    build = getattr(hypothesis_regex, "base_regex_strategy", None)
    if build is None or getattr(build, "memoized", False):
        return

    @functools.wraps(build)
    def memoized(regex: Any, *, parsed: Any = None, alphabet: Any = None) -> Any:
        key = (regex.pattern, regex.flags, repr(alphabet))
        found = built.get(key)
        if found is None:
            found = built[key] = build(regex, parsed=parsed, alphabet=alphabet)
        return found

    built: dict[tuple[Any, ...], Any] = {}
    memoized.memoized = True  # type: ignore[attr-defined]
    hypothesis_regex.base_regex_strategy = memoized
    _memoize_character_classes(hypothesis_regex)
    _memoize_parsed_regexes(hypothesis_regex)


def _memoize_character_classes(hypothesis_regex: Any) -> None:
    """Keep each character class's strategy too: schemathesis' coverage phase spells a field's
    length bounds into its pattern (`^(?=.{1,100}$)...`), so each bound is a pattern of its
    own, and each rebuilt the text rule's classes code point by code point (about 10 s of the
    job's CPU). A class's strategy is a pure function of its members, the flags and the
    alphabet (no group state), so it is kept and handed out again; the cases are the same."""
    build = getattr(hypothesis_regex, "_strategy", None)
    sre = getattr(hypothesis_regex, "sre", None)
    if build is None or sre is None or getattr(build, "memoized", False):
        return

    @functools.wraps(build)
    def memoized(codes: Any, context: Any, is_unicode: bool, *, alphabet: Any) -> Any:
        if not (isinstance(codes, tuple) and codes[0] == sre.IN):
            return build(codes, context, is_unicode, alphabet=alphabet)
        key = (repr(codes[1]), int(context.flags), is_unicode, repr(alphabet))
        found = classes.get(key)
        if found is None:
            found = classes[key] = build(codes, context, is_unicode, alphabet=alphabet)
        return found

    classes: dict[tuple[Any, ...], Any] = {}
    memoized.memoized = True  # type: ignore[attr-defined]
    hypothesis_regex._strategy = memoized


def _memoize_parsed_regexes(hypothesis_regex: Any) -> None:
    """Keep each `from_regex` strategy's build whole, its parse with it: Hypothesis' strategy
    cache misses whenever the alphabet is a new (equal) object, and each miss parsed the pattern
    again before reaching the kept strategy (the text rule's 6,400 characters: ~25 ms a parse).
    The build is a pure function of the pattern, its flags, `fullmatch` and the alphabet."""
    build = getattr(hypothesis_regex, "regex_strategy", None)
    if build is None or getattr(build, "memoized", False):
        return

    @functools.wraps(build)
    def memoized(regex: Any, fullmatch: bool, *, alphabet: Any, **options: Any) -> Any:
        compiled = regex if isinstance(regex, re.Pattern) else re.compile(regex)
        key = (compiled.pattern, compiled.flags, fullmatch, repr(alphabet), repr(options))
        found = built.get(key)
        if found is None:
            found = built[key] = build(regex, fullmatch, alphabet=alphabet, **options)
        return found

    built: dict[tuple[Any, ...], Any] = {}
    memoized.memoized = True  # type: ignore[attr-defined]
    hypothesis_regex.regex_strategy = memoized


_memoize_regex_strategies()

#: The coverage phase's slow draws, kept (the module's docstring): `generative_draws.json`.
KEPT_DRAWS = Path(__file__).with_name("generative_draws.json")
#: A draw slower than this (CPU seconds) is one to keep; one slower than WARN_OVER and not kept
#: is named in a warning (the file is then out of date: a new pattern, a new version).
KEEP_OVER = 0.05
WARN_OVER = 0.5


def _draw_key(pattern: str, min_length: int | None, max_length: int | None) -> str:
    text = f"{pattern}\0{min_length}\0{max_length}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _draw_versions() -> dict[str, str]:
    """The versions a draw was made with, besides its pattern and length bounds."""
    return {
        "hypothesis": importlib.metadata.version("hypothesis"),
        "schemathesis": importlib.metadata.version("schemathesis"),
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
    }


def _replay_kept_draws() -> None:
    """Hand out the kept value of each slow boundary draw (the module's docstring). A draw
    slower than WARN_OVER that is not kept is named in a warning. `GENERATIVE_KEEP_DRAWS=1`
    hands out none: it draws each anew and writes every one slower than KEEP_OVER to
    KEPT_DRAWS at exit, with the versions that drew them. If schemathesis' internals move,
    nothing is patched: the draws are made, only slower."""
    from hypothesis import strategies as st
    from schemathesis.specs.openapi.coverage import _schema

    build = getattr(_schema, "_pattern_strategy", None)
    draw = getattr(_schema, "cached_draw", None)
    matches = getattr(_schema, "matches_pattern", None)
    if build is None or draw is None or matches is None or getattr(build, "kept", False):
        return
    keeping = os.environ.get("GENERATIVE_KEEP_DRAWS") == "1"
    kept: dict[str, str] = {}
    if KEPT_DRAWS.exists() and not keeping:
        stored = json.loads(KEPT_DRAWS.read_text("utf-8"))
        kept = {d["key"]: d["value"] for d in stored["draws"]}
    # each pattern strategy's bounds, by id (the strategy kept with them: its id is not reused)
    bounds: dict[int, tuple[Any, str, int | None, int | None]] = {}
    just: dict[str, Any] = {}
    slow: dict[str, dict[str, Any]] = {}

    @functools.wraps(build)
    def replayed(
        session: Any, pattern: str, min_length: int | None, max_length: int | None, fmt: Any
    ) -> Any:
        key = _draw_key(pattern, min_length, max_length)
        value = kept.get(key) if fmt is None else None
        if value is not None and _within(value, matches(pattern), min_length, max_length):
            if key not in just:
                just[key] = st.just(value)
            return just[key]
        strategy = build(session, pattern, min_length, max_length, fmt)
        if strategy is not None and fmt is None:
            bounds[id(strategy)] = (strategy, pattern, min_length, max_length)
        return strategy

    @functools.wraps(draw)
    def timed(session: Any, strategy: Any) -> Any:
        started = time.process_time()
        value = draw(session, strategy)
        cpu = time.process_time() - started
        drawn = bounds.get(id(strategy))
        if drawn is None:
            return value
        _, pattern, min_length, max_length = drawn
        if cpu > KEEP_OVER and isinstance(value, str):
            key = _draw_key(pattern, min_length, max_length)
            slow[key] = {"key": key, "min_length": min_length, "max_length": max_length}
            slow[key]["value"] = value
        if cpu > WARN_OVER and not keeping:
            warnings.warn(
                f"a boundary draw ({min_length}-{max_length} characters) took {cpu:.1f} s of CPU "
                f"and is not kept in {KEPT_DRAWS.name}: GENERATIVE_KEEP_DRAWS=1 writes it",
                stacklevel=1,
            )
        return value

    def write() -> None:
        draws = sorted(slow.values(), key=lambda d: str(d["key"]))
        document = {"versions": _draw_versions(), "draws": draws}
        KEPT_DRAWS.write_text(json.dumps(document, indent=1) + "\n", "utf-8")

    replayed.kept = True  # type: ignore[attr-defined]
    _schema._pattern_strategy = replayed
    _schema.cached_draw = timed
    if keeping:
        atexit.register(write)


def _within(value: Any, matches: Any, min_length: int | None, max_length: int | None) -> bool:
    """Whether a kept value is one the draw could give (its pattern, its length bounds)."""
    return (
        isinstance(value, str)
        and bool(matches(value))
        and (min_length is None or len(value) >= min_length)
        and (max_length is None or len(value) <= max_length)
    )


_replay_kept_draws()

#: Examples per operation and generation mode; 35 operations x 2 modes x 15 = 1,050 generated
#: cases, over MIN_CASES, besides the coverage phase's (2,927 cases sent in all, 2026-11-26).
#: (50 when there were 16 operations; 30 until make test outgrew its 8 minutes; 20 for 29.)
MAX_EXAMPLES = 15
MIN_CASES = 1000
LOCAL_EXCEPTIONS = ["ignored_auth"]

CASES: Counter[str] = Counter()
STATUSES: Counter[int] = Counter()
#: The Idempotency-Keys sent so far, per operation (see the module's docstring).
KEYS_SENT: set[tuple[str, str, str]] = set()


# The document the app serves (test_the_served_document_is_the_generated_one holds them equal);
# loaded here, not through `schemathesis.pytest.from_fixture`, which pytest 9 breaks.
schema = schemathesis.openapi.from_dict(openapi_document())
schema.config.generation.update(
    modes=list(schemathesis.GenerationMode),
    max_examples=MAX_EXAMPLES,
    database="none",
    # Function keys are the host's business (see above): no key header is generated, and its
    # absence is not negative data here.
    with_security_parameters=False,
)
schema.config.checks.update(excluded_check_names=LOCAL_EXCEPTIONS)
# The operators' routes through the signed-in door (/outbox/console/...) are the same operations
# as through the key's door, whose cases are generated here; without a signed-in operator they
# answer 401 before parsing anything
# (packages/cosmos-outbox-operators/tests/operators/test_console.py holds both doors equal):
# generating them again would cost a third more time for no new finding.
generated = schema.exclude(path_regex=r"^/outbox/console/")
#: The operations the document declares (one generated test each).
OPERATIONS = sum(1 for _ in generated.get_all_operations())
gc.freeze()  # speed only: the imports set aside from the collector (the module's docstring)


@pytest.fixture(scope="module", autouse=True)
def _collected_objects_frozen() -> Iterator[None]:
    """Speed only (the module's docstring): what collection built is set aside from the
    collector while the cases run, and handed back after them."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session | None]:
    """One connection pool for the module's cases (the module's docstring); None (a
    connection per case, schemathesis' default) if schemathesis' session class moves."""
    try:
        from schemathesis.transport.requests import ManagedCookiesSession
    except ImportError:
        yield None
        return
    with ManagedCookiesSession() as session:
        # Without a session schemathesis sends none of a session's default headers: nor here.
        session.headers.clear()
        yield session


def test_the_served_document_is_the_generated_one(client: Client) -> None:
    reply = client.request("GET", "/openapi.json")
    assert reply.status == 200
    served_with = json.loads(json.dumps(openapi_document(SESSION_STACK_SETTINGS)))
    assert reply.json() == served_with


@generated.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_conforms_to_its_openapi_document(
    case: schemathesis.Case[Any], target: Target, http: requests.Session | None
) -> None:
    query: dict[str, Any] = case.query or {}
    headers: dict[str, Any] = dict(case.headers or {})
    body = case.body if isinstance(case.body, dict) else {}
    token_given = (
        "continuationToken" in query
        or "continuationToken" in body  # a re-drive's next page
        or any(name.lower() == "x-continuation-token" for name in headers)
    )
    if case.headers:
        # The client writes str headers as latin-1: this str becomes the value's UTF-8 bytes.
        for name, value in list(case.headers.items()):
            if isinstance(value, str) and not value.isascii():
                case.headers[name] = value.encode("utf-8").decode("latin-1")
    key = _key(next((v for n, v in headers.items() if n.lower() == "idempotency-key"), None))
    key_reused = key is not None and (case.method, case.path, key) in KEYS_SENT
    if key is not None:
        KEYS_SENT.add((case.method, case.path, key))
    excluded: list[CheckFunction] = [positive_data_acceptance] if token_given or key_reused else []
    if _a_parameter_reaches_the_app_as_nothing(case):
        excluded.append(negative_data_rejection)
    response = case.call_and_validate(
        base_url=target.api_url,
        session=http,
        headers=target.headers,
        timeout=SHORT,  # a hang guard: the session stack's bounded routes answer within 20 s
        excluded_checks=excluded,
    )
    CASES[f"{case.method} {case.path}"] += 1
    STATUSES[response.status_code] += 1


def _key(value: Any) -> str | None:
    """The key a header value names (`"abc"` and `abc` are one key); None if it names none."""
    try:
        return parse_key(value) if isinstance(value, str) else None
    except HttpProblemError:
        return None


def _a_parameter_reaches_the_app_as_nothing(case: schemathesis.Case[Any]) -> bool:
    """Whether the Functions host hands the app any of the case's query parameters as nothing.
    The query is the one schemathesis' transport writes (a list once per item, `None` left out);
    the host joins a repeated name's values with ',' and drops an empty result."""
    if not case.query:
        return False  # no query parameter to drop (and no query to write)
    wire = case.as_transport_kwargs(base_url="http://app")
    url = requests.Request("GET", wire["url"], params=wire.get("params")).prepare().url or ""
    written: dict[str, list[str]] = {}
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        written.setdefault(name, []).append(value)
    return any(not ",".join(written.get(name, [])) for name in case.query or {})


@pytest.fixture(scope="module", autouse=True)
def _every_case_counted() -> Iterator[None]:
    """After the module's tests, whichever of them ran and in whatever order (`-k`, `-x`,
    `--lf`): none of the cases sent got a server error, and, when every operation was
    generated, more than MIN_CASES cases ran in all (a failure here is reported as an error of
    the module's last test)."""
    yield
    if not CASES:
        return
    total = sum(CASES.values())
    print(f"\nschemathesis: {total} cases; statuses {dict(sorted(STATUSES.items()))}")
    assert not [s for s in STATUSES if s >= 500], STATUSES
    if len(CASES) == OPERATIONS:
        assert total >= MIN_CASES, CASES
