#!/usr/bin/env bash
# The deployed smoke test's suites (.github/workflows/deployed-smoke.yml; docs/testing.md, "The
# deployed smoke test"): the test paths given, in their deployed mode (`pytest --deployed`:
# tools/target.py), against the deployment `main` of resource group $RG, as the signed-in Azure
# CLI identity, which the deployment gave the data roles (principalId). It reads the outputs the
# suites need (tools/target.py's VARIABLES: each an environment variable of the same name) and
# the host's master key (AZURE_FUNCTION_APP_KEY, masked in the log), waits for the app's first
# start (its health, up to 5 minutes), then runs pytest from the repository's .venv. Exit
# status: pytest's (1 when the app never answers).
set -euo pipefail
(($#)) || { echo "usage: RG=<group> deploy/smoke.sh TEST_PATH..." >&2; exit 2; }
output() { az deployment group show -g "$RG" -n main --query "properties.outputs.$1.value" -o tsv; }
for name in $(.venv/bin/python -c 'from tools.target import VARIABLES; print(*VARIABLES)'); do
  value=$(output "$name")
  export "$name=$value"
done
app=$(output AZURE_FUNCTION_APP_NAME)
AZURE_FUNCTION_APP_KEY=$(az functionapp keys list -g "$RG" -n "$app" --query masterKey -o tsv)
echo "::add-mask::$AZURE_FUNCTION_APP_KEY"
export AZURE_FUNCTION_APP_KEY

status=000
for _ in $(seq 1 30); do  # a Flex Consumption app's first start
  status=$(curl -s -o /dev/null -w '%{http_code}' "$AZURE_FUNCTION_APP_URL/api/health") || true
  [ "$status" = 200 ] && break
  sleep 10
done
[ "$status" = 200 ] || { echo "deployed smoke: /api/health answered $status"; exit 1; }
exec .venv/bin/python -m pytest --deployed -p no:cacheprovider -q -rA "$@"
