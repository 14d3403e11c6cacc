#!/usr/bin/env bash
# Static security scan of the Bicep templates with checkov (bicep + secrets frameworks).
#
# checkov lives in its own venv (.venv-checkov, git-ignored): its dependency tree is large and
# conflicts with the app's, so it never goes into .venv. The version is pinned exactly so pip
# does not backtrack (first install: under a minute; a scan: about 4.5 s of CPU, 8.7 s the first
# in a new venv, which compiles what it imports).
# Skipped checks are justified in place in the templates: `//checkov:skip=CKV_...: reason`
# inside the resource block (Bicep comments are //, not #).
#
# Usage: deploy/checkov.sh      (from anywhere; non-zero exit when a check fails)
#        deploy/checkov.sh --install-only   (its venv only: `make test` builds it beside .venv)
# Env:   UV (uv installs checkov when set: make sets it),
#        CHECKOV_VENV (default <repo>/.venv-checkov), CHECKOV_PYTHON (default python3.11)
set -euo pipefail

CHECKOV_VERSION="3.3.30"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CHECKOV_VENV:-$ROOT/.venv-checkov}"
PYTHON="${CHECKOV_PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("checkov"))' 2>/dev/null || true
}

if [[ ! -x "$VENV/bin/checkov" || "$(installed_version)" != "$CHECKOV_VERSION" ]]; then
  echo "checkov.sh: installing checkov==$CHECKOV_VERSION into $VENV" >&2
  # pip's warnings about unreachable extra index locations are noise here.
  if [[ -n "${UV:-}" ]]; then  # make's uv (Makefile: UV), else the venv's pip
    # uv's venv, without pip (uv installs into it): the install 3.2 s of CPU, not 6.4 s.
    "$UV" venv --quiet --clear --python "$("$PYTHON" -c 'import sys; print(sys.executable)')" "$VENV"
    "$UV" pip install --quiet --python "$VENV/bin/python" "checkov==$CHECKOV_VERSION"
  else
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION" \
      2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
  fi
fi
# checkov's JSONPath parser (bc-jsonpath-ng, on PLY) builds its LALR table again for each
# expression it parses (about 200 a scan: 5.5 of the 10 s of CPU a scan took), as it never writes
# the table. PLY reads a table module beside the parser where there is one whose grammar's
# signature matches its own (else it builds the table, as before): written once per venv, for
# the parser and its extension, by the same call with write_tables on (0.1 s).
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
if [[ ! -f "$site/bc_jsonpath_ng/ext/parser_jsonpath_parsetab.py" ]]; then
  "$VENV/bin/python" - <<'PY' || echo "checkov.sh: no JSONPath parser table written (a scan builds it each time)" >&2
import os

import ply.yacc
from bc_jsonpath_ng import parser
from bc_jsonpath_ng.ext import parser as ext

for module, cls in ((parser, parser.JsonPathParser), (ext, ext.ExtentedJsonPathParser)):
    ply.yacc.yacc(
        module=cls(),
        tabmodule="parser_jsonpath_parsetab",
        outputdir=os.path.dirname(module.__file__),
        start="jsonpath",
        write_tables=True,
        debug=False,
        errorlog=ply.yacc.NullLogger(),
    )
PY
fi
[[ "${1:-}" == "--install-only" ]] && exit 0

cd "$ROOT"
# --skip-download: no calls to the vendor platform (works offline and in CI).
# operators-signin.bicep holds Microsoft Graph (Entra ID) resources only, which checkov has no
# checks for, and its parser (pycep 0.5) predates Bicep's `extension` keyword that they need;
# tests/deploy parses and checks that file (pycep 0.7).
# A template checkov cannot parse is one it checked nothing of, and it says so only in its
# summary ("Parsing errors: 1"): that fails the scan (its pycep 0.5 reads no lambda, `=>`).
status=0
output="$("$VENV/bin/checkov" --quiet --compact --skip-download \
  --skip-path deploy/modules/operators-signin.bicep \
  --framework bicep secrets --directory deploy 2>&1)" || status=$?
printf '%s\n' "$output"
if grep -Eq 'Parsing errors: [1-9]' <<<"$output"; then
  echo "checkov.sh: checkov could not parse a template under deploy/, so none of its checks ran on it" >&2
  exit 1
fi
exit "$status"
