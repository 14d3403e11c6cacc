#!/usr/bin/env bash
# The deployed smoke test's checks (.github/workflows/deployed-smoke.yml), against the deployment
# `main` of resource group $RG, as the signed-in Azure CLI identity (which the deployment gave the
# data roles: principalId): the app's health; a contact created (201, Location, ETag) and read
# back (200, the same ETag) over HTTP with the default function key; its ContactCreated event
# received from the topic's subscription, within 120 s, with its MessageId and SessionId as the
# relay sets them. $1 names the run (first: the relay on the Functions trigger; second: on
# Container Apps). Exit 1 at the first check that fails, naming it.
set -euo pipefail
run=${1:?usage: deploy/smoke.sh NAME}
output() { az deployment group show -g "$RG" -n main --query "properties.outputs.$1.value" -o tsv; }
app=$(output AZURE_FUNCTION_APP_NAME)
url=$(output AZURE_FUNCTION_APP_URL)
key=$(az functionapp keys list -g "$RG" -n "$app" --query functionKeys.default -o tsv)
SERVICEBUS_FULLY_QUALIFIED_NAMESPACE=$(output SERVICEBUS_FULLY_QUALIFIED_NAMESPACE)
SERVICEBUS_TOPIC=$(output SERVICEBUS_TOPIC)
SERVICEBUS_SUBSCRIPTION=$(output SERVICEBUS_SUBSCRIPTION)
export SERVICEBUS_FULLY_QUALIFIED_NAMESPACE SERVICEBUS_TOPIC SERVICEBUS_SUBSCRIPTION

for _ in $(seq 1 30); do  # a Flex Consumption app's first start
  status=$(curl -s -o /dev/null -w '%{http_code}' "$url/api/health") && [ "$status" = 200 ] && break
  sleep 10
done
[ "$status" = 200 ] || { echo "smoke $run: /api/health answered $status"; exit 1; }

created=$(curl -s -D - -o /dev/null -X POST "$url/api/contacts?code=$key" \
  -H 'content-type: application/json' \
  -d "{\"firstName\":\"Ada\",\"lastName\":\"Smoke $run\",\"email\":\"ada.$run@example.com\",\"companyName\":\"Engines\"}")
echo "$created" | head -1 | grep -q ' 201' || { echo "smoke $run: POST /api/contacts: $created"; exit 1; }
location=$(echo "$created" | tr -d '\r' | awk 'tolower($1) == "location:" {print $2}')
id=${location##*/}
curl -sf -o /dev/null "$url/api/contacts/$id?code=$key" || { echo "smoke $run: GET $location failed"; exit 1; }

CONTACT_ID=$id python - <<'PY'
import os, sys
from azure.identity import AzureCliCredential
from azure.servicebus import ServiceBusClient

contact = os.environ["CONTACT_ID"]
with ServiceBusClient(os.environ["SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"], AzureCliCredential()) as sb:
    with sb.get_subscription_receiver(
        os.environ["SERVICEBUS_TOPIC"], os.environ["SERVICEBUS_SUBSCRIPTION"],
        session_id=contact, max_wait_time=120,
    ) as receiver:
        for message in receiver.receive_messages(max_message_count=1, max_wait_time=120):
            receiver.complete_message(message)
            print(f"smoke: {message.subject} for {message.session_id} ({message.message_id})")
            sys.exit(0 if message.session_id == contact else 1)
print(f"smoke: no event for contact {contact} within 120 s")
sys.exit(1)
PY
echo "smoke $run: passed (contact $id)"
