// One Function App on the Flex Consumption plan (Linux, Python; or, with hostingPlan
// 'Consumption', Linux Consumption for Python 3.11/3.12 until its retirement on 30 September
// 2028), with its own plan (Flex allows one app per plan) and its own deployment-package
// container in the shared host storage account.
// Every connection is identity based through the user-assigned managed identity: no keys or
// connection strings in app settings.

@description('Function App name (globally unique: <name>.azurewebsites.net).')
param name string

@description('Region of the app and its plan.')
param location string

@description('Tags for every resource (azd-service-name is added here).')
param tags object = {}

@description('azd service name this app is deployed as (azure.yaml).')
param azdServiceName string = 'api'

@description('Flex Consumption plan name.')
param planName string

@description('Which functions run here: all, api (change-feed trigger, backlog timer and operators\' routes disabled) or relay (contact HTTP functions disabled; the operators\' routes run here).')
@allowed([
  'all'
  'api'
  'relay'
])
param appRole string = 'all'

@description('The relay runs in this app (its change-feed trigger and backlog timer, by appRole); false: it runs elsewhere (relay-containerapp.bicep, on the same leases), both disabled here.')
param relayHere bool = true

@description('Hosting plan: FlexConsumption (the default: Python 3.11 - 3.14, function groups, identity-based deployment) or Consumption (Linux Consumption, Y1: Python 3.11 and 3.12 only, no new language versions; Microsoft retires it on 30 September 2028).')
@allowed([
  'FlexConsumption'
  'Consumption'
])
param hostingPlan string = 'FlexConsumption'

@description('Python version of the Functions runtime: 3.11 and 3.12 run azure-functions 1.x, 3.13 and 3.14 2.x (cosmos-outbox follows either). Linux Consumption: 3.11 or 3.12. The Contacts app is tested on 3.13 (deploy/README.md, Python versions).')
@allowed([
  '3.11'
  '3.12'
  '3.13'
  '3.14'
])
param pythonVersion string = '3.13'

var flexConsumption = hostingPlan == 'FlexConsumption'

@description('Maximum number of instances the app scales out to.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Memory of each instance.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Existing storage account for the host (AzureWebJobsStorage) and the deployment package.')
param storageAccountName string

@description('Resource id of the user-assigned managed identity the app runs as.')
param identityId string

@description('Client id of that identity.')
param identityClientId string

@description('Application Insights connection string (not a secret: the component accepts Entra ID auth only).')
param applicationInsightsConnectionString string

@description('Cosmos DB account endpoint, https://<account>.documents.azure.com:443/.')
param cosmosEndpoint string

@description('Service Bus fully qualified namespace, <namespace>.servicebus.windows.net.')
param serviceBusFullyQualifiedNamespace string

@description('Blob service endpoint of the claim check\'s payload account (https://<account>.blob.core.windows.net/).')
param payloadBlobEndpoint string

@description('The payloads\' private container (OUTBOX_PAYLOAD_CONTAINER).')
param payloadContainer string = 'outbox-payloads'

@description('The largest body the relay offloads (OUTBOX_PAYLOAD_MAX_BYTES; 0: no claim check).')
@minValue(0)
param payloadMaxBytes int = 2097152

@description('The largest message and batch the relay sends (SERVICEBUS_MAX_MESSAGE_BYTES): 262144 on Standard, 1048576 on Premium.')
@minValue(1024)
param serviceBusMaxMessageBytes int = 262144

param cosmosDatabase string
param cosmosContainer string
param cosmosLeaseContainer string
param serviceBusTopic string

@description('The topic\'s subscriptions whose dead letters the operators\' routes recover (OUTBOX_SUBSCRIPTIONS: name or name=projection container, comma-separated).')
param watchedSubscriptions string = ''

@description('Queues whose dead letters the operators\' routes recover too (OUTBOX_DEAD_LETTER_QUEUES, comma-separated).')
param deadLetterQueues string = ''

@description('The queue the relay schedules scheduled events\' releases on (SERVICEBUS_SCHEDULE_QUEUE); empty: none (the Contacts app schedules no events; an app that does creates the queue and grants Data Sender and Data Receiver on it).')
param scheduleQueue string = ''

@description('Seconds an event document lives in Cosmos before TTL deletes it; must outlive any relay outage.')
@minValue(3600)
param eventTtlSeconds int = 864000

@description('Seconds a write\'s Idempotency-Key is remembered (IDEMPOTENCY_TTL_SECONDS: the TTL of its record).')
@minValue(60)
param idempotencyTtlSeconds int = 86400

@description('Put before each aggregate type\'s CloudEvents source path (CLOUDEVENTS_SOURCE_BASE); empty: the path alone.')
param cloudEventsSourceBase string = ''

@description('Change feed poll delay of the relay trigger, in milliseconds.')
@minValue(100)
param feedPollDelayMs int = 1000

@description('The relay\'s lease intervals in milliseconds (LEASE_*_INTERVAL_MS, the trigger\'s binding properties of those names); 0: the change feed processor\'s own.')
@minValue(0)
param leaseAcquireIntervalMs int = 0
@minValue(0)
param leaseExpirationIntervalMs int = 0
@minValue(0)
param leaseRenewIntervalMs int = 0

@description('Maximum documents per relay invocation.')
@minValue(1)
@maxValue(1000)
param maxItemsPerInvocation int = 100

@description('NCRONTAB schedule of the backlog estimate timer (read at indexing time).')
param backlogEstimateSchedule string = '0 * * * * *'

@description('Seconds a pending event may wait after the poll delay before the relay is said to be stalled (OUTBOX_RELAY_STALL_SECONDS).')
@minValue(1)
param relayStallSeconds int = 60

@description('Keep the watched dead-letter queues\' failures in Cosmos DB, one failedMessage record per failure, drained by whatever runs the relay (OUTBOX_FAILURE_INGEST, by failureIngestByRole and relayHere: true where the relay runs here, its Service Bus trigger per dead-letter path needing Azure Service Bus Data Receiver on the watched subscriptions and queues, as the operators\' routes do; elsewhere in the api app and where the relay runs in containers, which read the records and drain nothing). false: none; the operators\' routes peek the queues.')
param failureIngest bool = true

@description('Seconds an archived or resolved failure record is kept (OUTBOX_FAILURE_RETENTION_SECONDS); an open one never expires.')
@minValue(3600)
param failureRetentionSeconds int = 1209600

@description('Origins a browser may call the HTTP API from (App Service CORS: the platform answers preflights and adds Access-Control-Allow-Origin, as func start does with local.settings.json Host.CORS). Empty: no CORS. \'*\' allows any origin, but not with corsSupportCredentials.')
param corsAllowedOrigins array = []

@description('Send Access-Control-Allow-Credentials: true (cookies, Authorization headers) to the allowed origins; needs exact origins, not \'*\' (Host.CORSCredentials locally).')
param corsSupportCredentials bool = false

@description('Client id of the Entra ID app registration operators sign in with (operators-signin.bicep): App Service Authentication is turned on for the operators\' console, in front of the host, without a client secret (the app\'s managed identity is its credential). Empty: no sign-in here (the app that does not serve the operators\' routes, or operatorsSignIn=false).')
param operatorsSignInClientId string = ''

// Functions as named in function_app.py. Disabled with the official
// AzureWebJobs.<function name>.Disabled app setting, so one package serves every role.
var contactHttpFunctions = [
  'create_contact'
  'get_contact'
  'list_contacts'
  'patch_contact'
  'update_contact_name'
  'update_contact_email'
  'update_contact_description'
  'update_contact_company'
  'delete_contact'
  'openapi'
  // The catch-all 404/405 problem route: its Allow lists the contact routes, so it goes with them.
  'zz_not_routed'
]
var relayFunctions = [
  'relay_events'
  'outbox_backlog'
  'outbox_operations'
]
// The operators' routes (auth level ADMIN: the host's master key), as function_app.py indexes
// them (tests/deploy/test_app_roles.py holds this list to the indexed app: the lists below are
// made from it). They publish through the relay path and read the leases, so they run where the
// relay runs: in the relay app when it is split off, never in the api app. (`outbox_health`,
// anonymous, runs in both.)
var adminHttpFunctions = [
  'outbox_status'
  'backlog_history'
  'list_quarantine'
  'show_quarantined'
  'replay_quarantined'
  'discard_quarantined'
  'redrive_events'
  'preview_redrive'
  'redrive_events_operation'
  'count_dead_letters'
  'list_dead_letters'
  'peek_dead_letter'
  'resubmit_dead_letters'
  'discard_dead_letters'
  'preview_resubmit_dead_letters'
  'preview_discard_dead_letters'
  'event_journey'
  'show_failure'
  'list_failures'
  'retry_failure'
  'archive_failure'
  'unarchive_failure'
  'aggregate_journey'
  'aggregate_documents'
  'subscribers_status'
  'release_held'
  'list_groups'
  'preview_group'
  'act_on_group'
  'unarchive_group'
  'resubmit_dead_letters_operation'
  'discard_dead_letters_operation'
  'list_operations'
  'show_operation'
  'cancel_operation'
  'continue_operation'
]
// The same routes for a signed-in operator (outbox/console/..., admitted by App Service
// Authentication and the operator app role: operators-signin.bicep), and the console page and
// its files: made from the list above, as the operators' package names its console's twins.
var consolePages = [
  'console_page'
  'console_static'
]
var consoleTwins = [for name in adminHttpFunctions: 'console_${name}']
var consoleHttpFunctions = concat(consoleTwins, consolePages)
// What the api app does not run: the relay's functions and the operators' routes.
var relayAndAdminFunctions = concat(relayFunctions, adminHttpFunctions, consoleHttpFunctions)
// The relay app keeps `health` so it still has a probe, and the operators' routes.
var disabledByRole = {
  all: []
  api: relayAndAdminFunctions
  relay: contactHttpFunctions
}
var relayElsewhere = relayFunctions
var disabledFunctions = relayHere ? disabledByRole[appRole] : union(disabledByRole[appRole], relayElsewhere)
// OUTBOX_FAILURE_INGEST: only what runs the relay drains the dead letters into failure records
// (the `ingest_failures_*` triggers, whose names the Bicep cannot list to disable: a sanitised
// entity name carries a hash); the others read the records (`elsewhere`). The api app serves no
// operators' routes, and a relay in containers (relayHere false) drains with its own receivers.
var failureIngestByRole = {
  all: 'true'
  api: 'elsewhere'
  relay: 'true'
}
var failureIngestMode = failureIngest ? (relayHere ? failureIngestByRole[appRole] : 'elsewhere') : 'false'
var disabledFunctionSettings = [for functionName in disabledFunctions: {
  name: 'AzureWebJobs.${functionName}.Disabled'
  value: 'true'
}]

// App Service Authentication for the operators' console (operatorsSignInClientId): it signs
// operators in with Entra ID and hands the app X-MS-CLIENT-PRINCIPAL (with their app roles), and
// sets WEBSITE_AUTH_ENABLED=True, without which (and OUTBOX_CONSOLE_SIGN_IN, below) cosmos-outbox
// believes no such header. Requests
// without a session pass through unauthenticated (AllowAnonymous): the contact API keeps its
// function keys, the operators' routes their master key, and the console's routes refuse them
// (401) -- the app decides, route by route. No client secret: App Service Authentication asserts
// the user-assigned managed identity, which the registration trusts (federated credential).
var operatorsSignIn = !empty(operatorsSignInClientId)
var operatorsSignInSettings = [
  // the owner's word that App Service Authentication signs operators in: cosmos-outbox believes
  // X-MS-CLIENT-PRINCIPAL only with it, WEBSITE_AUTH_ENABLED=True and not on a local host
  {
    name: 'OUTBOX_CONSOLE_SIGN_IN'
    value: 'app-service-authentication'
  }
  {
    name: 'OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID'
    value: identityClientId
  }
  {
    name: 'WEBSITE_AUTH_AAD_ALLOWED_TENANTS'
    value: tenant().tenantId
  }
]
var signInSettings = operatorsSignIn ? operatorsSignInSettings : []

var deploymentContainerName = 'app-package-${take(toLower(name), 32)}-${take(uniqueString(name, resourceGroup().id), 7)}'

var appSettings = [
  // Host storage, identity based (Flex Consumption).
  {
    name: 'AzureWebJobsStorage__accountName'
    value: storageAccount.name
  }
  {
    name: 'AzureWebJobsStorage__credential'
    value: 'managedidentity'
  }
  {
    name: 'AzureWebJobsStorage__clientId'
    value: identityClientId
  }
  // Cosmos DB trigger connection (Functions extension) ...
  {
    name: 'CosmosDBConnection__accountEndpoint'
    value: cosmosEndpoint
  }
  {
    name: 'CosmosDBConnection__credential'
    value: 'managedidentity'
  }
  {
    name: 'CosmosDBConnection__clientId'
    value: identityClientId
  }
  // ... and the Service Bus connection the relay's SDK client uses.
  {
    name: 'ServiceBusConnection__fullyQualifiedNamespace'
    value: serviceBusFullyQualifiedNamespace
  }
  {
    name: 'ServiceBusConnection__credential'
    value: 'managedidentity'
  }
  {
    name: 'ServiceBusConnection__clientId'
    value: identityClientId
  }
  // The claim check: bodies too large for a message, in the payload account (identity based).
  {
    name: 'OutboxPayloadStorage__blobServiceUri'
    value: payloadBlobEndpoint
  }
  {
    name: 'OutboxPayloadStorage__credential'
    value: 'managedidentity'
  }
  {
    name: 'OutboxPayloadStorage__clientId'
    value: identityClientId
  }
  {
    name: 'OUTBOX_PAYLOAD_CONTAINER'
    value: payloadContainer
  }
  {
    name: 'OUTBOX_PAYLOAD_MAX_BYTES'
    value: string(payloadMaxBytes)
  }
  {
    name: 'SERVICEBUS_MAX_MESSAGE_BYTES'
    value: string(serviceBusMaxMessageBytes)
  }
  // DefaultAzureCredential in the app's own code picks the user-assigned identity from this.
  {
    name: 'AZURE_CLIENT_ID'
    value: identityClientId
  }
  // Telemetry with Entra ID auth (the component has local auth disabled).
  {
    name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
    value: applicationInsightsConnectionString
  }
  {
    name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
    value: 'ClientId=${identityClientId};Authorization=AAD'
  }
  // The Python worker exports the app's OpenTelemetry (opentelemetry-api) through the Azure
  // Monitor distro; host.json telemetryMode OpenTelemetry does the same for the host.
  {
    name: 'PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY'
    value: 'true'
  }
  // The app's own settings (infra/settings.py).
  {
    name: 'COSMOS_DATABASE'
    value: cosmosDatabase
  }
  {
    name: 'COSMOS_CONTAINER'
    value: cosmosContainer
  }
  {
    name: 'COSMOS_LEASE_CONTAINER'
    value: cosmosLeaseContainer
  }
  {
    name: 'SERVICEBUS_TOPIC'
    value: serviceBusTopic
  }
  {
    name: 'OUTBOX_SUBSCRIPTIONS'
    value: watchedSubscriptions
  }
  {
    name: 'OUTBOX_DEAD_LETTER_QUEUES'
    value: deadLetterQueues
  }
  {
    name: 'SERVICEBUS_SCHEDULE_QUEUE'
    value: scheduleQueue
  }
  {
    name: 'EVENT_TTL_SECONDS'
    value: string(eventTtlSeconds)
  }
  {
    name: 'IDEMPOTENCY_TTL_SECONDS'
    value: string(idempotencyTtlSeconds)
  }
  {
    name: 'CLOUDEVENTS_SOURCE_BASE'
    value: cloudEventsSourceBase
  }
  {
    name: 'FEED_POLL_DELAY_MS'
    value: string(feedPollDelayMs)
  }
  {
    name: 'MAX_ITEMS_PER_INVOCATION'
    value: string(maxItemsPerInvocation)
  }
  {
    name: 'LEASE_ACQUIRE_INTERVAL_MS'
    value: string(leaseAcquireIntervalMs)
  }
  {
    name: 'LEASE_EXPIRATION_INTERVAL_MS'
    value: string(leaseExpirationIntervalMs)
  }
  {
    name: 'LEASE_RENEW_INTERVAL_MS'
    value: string(leaseRenewIntervalMs)
  }
  {
    name: 'BACKLOG_ESTIMATE_SCHEDULE'
    value: backlogEstimateSchedule
  }
  {
    // When the relay's hosts look for bulk operations to work (one query in the operations'
    // partition each time; nothing else is read while none is open).
    name: 'OUTBOX_OPERATIONS_SCHEDULE'
    value: '*/5 * * * * *'
  }
  {
    // Healthy means moving: a pending event may wait the poll delay and this long before the
    // relay is said to be stalled (the status, the console, outbox.relay.stalled, /health).
    name: 'OUTBOX_RELAY_STALL_SECONDS'
    value: string(relayStallSeconds)
  }
  {
    name: 'OUTBOX_FAILURE_INGEST'
    value: failureIngestMode
  }
  {
    name: 'OUTBOX_FAILURE_RETENTION_SECONDS'
    value: string(failureRetentionSeconds)
  }
  {
    // The relay's processor (its leases apart from any trigger of the app's own on the same
    // lease container): the trigger's leaseContainerPrefix.
    name: 'OUTBOX_PROCESSOR_NAME'
    value: 'outbox.'
  }
]

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' existing = {
  parent: storageAccount
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  //checkov:skip=CKV_AZURE_225: zone redundancy on Flex Consumption is region-dependent and needs always-ready instances (cost); scale-to-zero is the default here. Set properties.zoneRedundant where supported for production.
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: flexConsumption ? {
    tier: 'FlexConsumption'
    name: 'FC1'
  } : {
    tier: 'Dynamic'
    name: 'Y1'
  }
  properties: {
    reserved: true
  }
}

// Flex Consumption: the runtime, scale and deployment package in functionAppConfig.
var flexAppConfig = {
  deployment: {
    storage: {
      type: 'blobContainer'
      value: '${storageAccount.properties.primaryEndpoints.blob}${deploymentContainerName}'
      authentication: {
        type: 'UserAssignedIdentity'
        userAssignedIdentityResourceId: identityId
      }
    }
  }
  scaleAndConcurrency: {
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
  }
  runtime: {
    name: 'python'
    version: pythonVersion
  }
}

// Linux Consumption: the runtime in linuxFxVersion and the settings Flex forbids; azd's zip
// deployment builds the app remotely (Oryx), as `func azure functionapp publish` does.
var consumptionSettings = [
  {
    name: 'FUNCTIONS_EXTENSION_VERSION'
    value: '~4'
  }
  {
    name: 'FUNCTIONS_WORKER_RUNTIME'
    value: 'python'
  }
  {
    name: 'SCM_DO_BUILD_DURING_DEPLOYMENT'
    value: 'true'
  }
  {
    name: 'ENABLE_ORYX_BUILD'
    value: 'true'
  }
]

resource site 'Microsoft.Web/sites@2024-04-01' = {
  //checkov:skip=CKV_AZURE_212: Flex Consumption scales per function group and to zero; a minimum instance count is configured with alwaysReady, not siteConfig. Add alwaysReady for the http group if cold starts matter.
  //checkov:skip=CKV_AZURE_213: App Service health check (instance eviction) does not apply to Flex Consumption; the app exposes anonymous GET /api/health for external probes (e.g. an Application Insights availability test).
  //checkov:skip=CKV_AZURE_222: the contact API is a public HTTP API protected by function keys; put it behind API Management or private endpoints for a private deployment.
  //checkov:skip=CKV_AZURE_17: callers authenticate with function keys (or Entra ID via APIM / App Service auth), not client certificates.
  name: name
  location: location
  tags: union(tags, {
    'azd-service-name': azdServiceName
  })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    publicNetworkAccess: 'Enabled'
    clientCertEnabled: false
    functionAppConfig: flexConsumption ? flexAppConfig : null
    siteConfig: {
      minTlsVersion: '1.2'
      http20Enabled: true
      ftpsState: 'Disabled'
      linuxFxVersion: flexConsumption ? null : 'Python|${pythonVersion}'
      appSettings: concat(appSettings, disabledFunctionSettings, signInSettings, flexConsumption ? [] : consumptionSettings)
      cors: {
        allowedOrigins: corsAllowedOrigins
        supportCredentials: corsSupportCredentials
      }
    }
  }
  dependsOn: [
    deploymentContainer
  ]
}

// App Service Authentication itself: a module of its own, deployed only with a registration.
module signIn 'appservice-auth.bicep' = if (operatorsSignIn) {
  name: '${name}-appservice-auth'
  params: {
    siteName: site.name
    clientId: operatorsSignInClientId
  }
}

output name string = site.name
output defaultHostName string = site.properties.defaultHostName
output url string = 'https://${site.properties.defaultHostName}'
@description('The operators\' console (cosmos-outbox\'s page; sign-in with Entra ID when operatorsSignInClientId is set).')
output consoleUrl string = 'https://${site.properties.defaultHostName}/api/outbox/console'
