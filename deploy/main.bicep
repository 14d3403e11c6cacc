// Contacts outbox service: Cosmos DB (outbox) -> change feed trigger (relay) -> Service Bus topic.
//
//   azd up                                   (azure.yaml, main.parameters.json)
//   az deployment group create -g <rg> -f deploy/main.bicep -p environmentName=<env>
//   func azure functionapp publish <functionAppName output>
//
// Everything authenticates with Entra ID through one user-assigned managed identity:
// Cosmos DB, Service Bus, the host storage account and Application Insights all have local
// (key) auth disabled, and the app settings hold endpoints and the identity's client id only.
// Resource group scope, so the same template works for azd and for `az deployment group`.
targetScope = 'resourceGroup'

@minLength(1)
@maxLength(40)
@description('Environment name (azd env name); seeds the default resource names.')
param environmentName string

@description('Region of every resource. The Flex Consumption plan is not offered in every region: az functionapp list-flexconsumption-locations.')
param location string = resourceGroup().location

@description('Object id of the deploying user (azd sets it): given data-plane roles to run the integration suites and watch the subscription. Empty: none.')
param principalId string = ''

@description('Type of principalId.')
@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param principalType string = 'User'

// ---- names (empty = derived from environmentName) ----
param functionAppName string = ''
param relayFunctionAppName string = ''
param subscriberFunctionAppName string = ''
param cosmosAccountName string = ''
param serviceBusNamespaceName string = ''
param storageAccountName string = ''
param payloadStorageAccountName string = ''
param applicationInsightsName string = ''
param logAnalyticsName string = ''
param identityName string = ''

@description('Database name (COSMOS_DATABASE).')
param cosmosDatabaseName string = 'outbox'

@description('Outbox container name (COSMOS_CONTAINER).')
param cosmosContainerName string = 'contacts'

@description('Lease container name (COSMOS_LEASE_CONTAINER).')
param cosmosLeaseContainerName string = 'leases'

@description('Cosmos DB serverless (true) or provisioned autoscale throughput (false).')
param cosmosServerless bool = true

@description('Topic name (SERVICEBUS_TOPIC).')
param serviceBusTopicName string = 'contact-events'

@description('Session-enabled subscription created for consumers.')
param serviceBusSubscriptionName string = 'all-events'

@description('Service Bus tier: Standard, or Premium for isolation, 1 MB batches and VNet support.')
@allowed([
  'Standard'
  'Premium'
])
param serviceBusSku string = 'Standard'

@description('Days after its last write a claim-check payload (the body of an event too large for a message) is deleted by the payload account\'s lifecycle rule. Longer than the messages\' time to live on the topic and its subscriptions (14 days), so no message outlives its payload; the margin is for dead-letter re-drives.')
@minValue(15)
param payloadRetentionDays int = 30

@description('The largest body the relay offloads to the payload store (OUTBOX_PAYLOAD_MAX_BYTES; 0: no claim check, large events are quarantined). Cosmos DB items are at most 2 MB.')
@minValue(0)
param payloadMaxBytes int = 2097152

@description('The subscriber\'s rights on its subscription: \'owner\' (Azure Service Bus Data Owner on that subscription only: the platform scales its trigger by target, on the subscription\'s message count) or \'receiver\' (Data Receiver: least privilege, and the platform falls back to incremental scaling). See deploy/README.md.')
@allowed([
  'owner'
  'receiver'
])
param subscriberServiceBusRights string = 'owner'

@description('Duplicate detection window (ISO 8601, PT20S..P7D). It must exceed the longest gap between a relay send and its retry, or a resend after a long outage is delivered twice. Fixed at topic creation.')
param duplicateDetectionHistoryTimeWindow string = 'P1D'

@description('Seconds an event document lives in Cosmos (EVENT_TTL_SECONDS). Must outlive any relay outage: an event that expires before it is relayed is lost.')
@minValue(3600)
param eventTtlSeconds int = 864000

@description('Seconds a write\'s Idempotency-Key is remembered (IDEMPOTENCY_TTL_SECONDS, the TTL of its record): a client\'s retries of one request must come within it. Like the topic\'s duplicate window (duplicateDetectionHistoryTimeWindow) for the relay\'s resends, it bounds how late a repeat is still recognised.')
@minValue(60)
param idempotencyTtlSeconds int = 86400

@description('Put before each aggregate type\'s CloudEvents source path (CLOUDEVENTS_SOURCE_BASE): empty (the source is /contacts), or an absolute URI naming this service, e.g. https://crm.example.com (the source is then https://crm.example.com/contacts).')
param cloudEventsSourceBase string = ''

@description('Change feed poll delay in milliseconds (FEED_POLL_DELAY_MS).')
@minValue(100)
param feedPollDelayMs int = 1000

@description('The relay\'s lease acquire interval in milliseconds (LEASE_ACQUIRE_INTERVAL_MS: the trigger\'s leaseAcquireInterval and cosmos-outbox relay\'s); 0: the change feed processor\'s own (13 s).')
@minValue(0)
param leaseAcquireIntervalMs int = 0

@description('The relay\'s lease expiration interval in milliseconds (LEASE_EXPIRATION_INTERVAL_MS); 0: the processor\'s own (60 s).')
@minValue(0)
param leaseExpirationIntervalMs int = 0

@description('The relay\'s lease renew interval in milliseconds (LEASE_RENEW_INTERVAL_MS), shorter than the expiration interval; 0: the processor\'s own (17 s).')
@minValue(0)
param leaseRenewIntervalMs int = 0

@description('Maximum documents per relay invocation (MAX_ITEMS_PER_INVOCATION).')
@minValue(1)
@maxValue(1000)
param maxItemsPerInvocation int = 100

@description('NCRONTAB schedule of the backlog estimate (BACKLOG_ESTIMATE_SCHEDULE).')
param backlogEstimateSchedule string = '0 * * * * *'

@description('Resource id of an action group the outbox alerts notify (empty: the alerts fire without notifications).')
param alertActionGroupId string = ''

@description('Alert when the oldest pending outbox event is older than this many seconds.')
@minValue(60)
param oldestPendingAgeAlertSeconds int = 300

@description('Python version of the apps (3.11, 3.12: azure-functions 1.x; 3.13, 3.14: 2.x). Linux Consumption: 3.11 or 3.12. Tested here on 3.13 (deploy/README.md, Python versions).')
@allowed([
  '3.11'
  '3.12'
  '3.13'
  '3.14'
])
param pythonVersion string = '3.13'

@description('Hosting plan of the contacts app (and the relay app): FlexConsumption (default) or Consumption (Linux Consumption, Python 3.11/3.12 only; retires 30 September 2028).')
@allowed([
  'FlexConsumption'
  'Consumption'
])
param hostingPlan string = 'FlexConsumption'

@description('Where the relay runs: functions (the change-feed trigger in the Function App, the default) or containerApps (`cosmos-outbox relay` replicas on Azure Container Apps, scaled by KEDA on the leases\' lag: relayImage; the Function App\'s trigger and backlog timer then disabled). Both use the same leases: switching moves the relay on its checkpoints (docs/relay-anywhere.md).')
@allowed([
  'functions'
  'containerApps'
])
param relayHosting string = 'functions'

@description('relayHosting containerApps: the relay image (deploy/relay-container/Dockerfile), e.g. <registry>.azurecr.io/cosmos-outbox-relay:0.5.0.')
param relayImage string = ''

@description('relayHosting containerApps: an Azure Container Registry of this resource group holding relayImage (the identity gets AcrPull); empty: a public image.')
param relayRegistryName string = ''

@description('relayHosting containerApps: replicas at most (at most one per physical partition of the container holds a lease).')
@minValue(1)
param relayMaxReplicas int = 10

@description('relayHosting containerApps: keda scales the replicas on the leases\' lag (KEDA\'s azure-cosmosdb scaler, KEDA 2.21+); fixed runs relayMaxReplicas replicas, no scale rule (where the managed KEDA lacks the scaler: docs/changefeed-deploying.md).')
@allowed([
  'keda'
  'fixed'
])
param relayScaling string = 'keda'

@description('Deploy the relay as a second Function App (API app: trigger disabled; relay app: contact HTTP functions disabled) so they scale, deploy and fail separately.')
param splitRelay bool = false

@description('Origins a browser may call the contact API from, comma-separated (the format of local.settings.json Host.CORS): the API app\'s CORS setting. Empty (the default): no CORS, browsers on other origins are refused. \'*\' allows any origin.')
param corsAllowedOrigins string = ''

@description('Allow credentials (cookies, Authorization headers) on CORS requests (Host.CORSCredentials locally); the origins must then be listed, not \'*\'.')
param corsSupportCredentials bool = false

@description('Deploy the subscriber app (subscriber/): its own Function App and identity, its session-enabled subscription and its projection container. Publish it with `func azure functionapp publish <AZURE_SUBSCRIBER_FUNCTION_APP_NAME>` from subscriber/.')
param deploySubscriber bool = false

@description('The subscriber\'s own session-enabled subscription (SUBSCRIBER_SUBSCRIPTION).')
param subscriberSubscriptionName string = 'contact-projection'

@description('The subscriber\'s projection container (PROJECTION_CONTAINER).')
param projectionContainerName string = 'contact-projections'

@description('Seconds an inbox record of the subscriber lives (INBOX_TTL_SECONDS): longer than the outbox keeps an event (eventTtlSeconds) and any re-drive.')
@minValue(3600)
param inboxTtlSeconds int = 1209600

@description('Flex Consumption: maximum instances per app.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Flex Consumption: memory per instance.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

var abbrs = loadJsonContent('abbreviations.json')
var token = toLower(uniqueString(subscription().id, resourceGroup().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
var appName = !empty(functionAppName) ? functionAppName : '${abbrs.webSitesFunctions}api-${token}'
var subscriberAppName = !empty(subscriberFunctionAppName) ? subscriberFunctionAppName : '${abbrs.webSitesFunctions}subscriber-${token}'
var relayAppName = !empty(relayFunctionAppName) ? relayFunctionAppName : '${abbrs.webSitesFunctions}relay-${token}'
// No lambdas (filter/map): checkov's Bicep parser cannot read them. Origins hold no spaces.
var corsOrigins = empty(trim(corsAllowedOrigins)) ? [] : split(replace(corsAllowedOrigins, ' ', ''), ',')
var hostStorageName = !empty(storageAccountName) ? storageAccountName : '${abbrs.storageStorageAccounts}${token}'
var payloadStorageName = !empty(payloadStorageAccountName) ? payloadStorageAccountName : '${abbrs.storageStorageAccounts}pl${token}'
// SERVICEBUS_MAX_MESSAGE_BYTES: Standard takes 256 KB messages and batches; Premium 1 MB
// batches (larger single messages are offloaded too, and travel in batches).
var serviceBusMaxMessageBytes = serviceBusSku == 'Premium' ? 1048576 : 262144

// Azure built-in role definition ids.
var storageBlobDataOwnerRoleId = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageQueueDataContributorRoleId = '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
var storageTableDataContributorRoleId = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
var monitoringMetricsPublisherRoleId = '3913510d-42f4-4e42-8a64-420c390055eb'

var appPrincipal = {
  id: identity.properties.principalId
  type: 'ServicePrincipal'
}
var developerPrincipals = empty(principalId) ? [] : [
  {
    id: principalId
    type: principalType
  }
]

// ---- identity ----
resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: !empty(identityName) ? identityName : '${abbrs.managedIdentityUserAssignedIdentities}${token}'
  location: location
  tags: tags
}

// The subscriber runs as an identity of its own: receive on its subscription, read/write its
// projection container, host storage; nothing on the outbox.
resource subscriberIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = if (deploySubscriber) {
  name: '${abbrs.managedIdentityUserAssignedIdentities}subscriber-${token}'
  location: location
  tags: tags
}

var subscriberPrincipals = deploySubscriber ? [
  {
    id: subscriberIdentity.properties.principalId
    type: 'ServicePrincipal'
  }
] : []

// ---- monitoring ----
resource logAnalytics 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: !empty(logAnalyticsName) ? logAnalyticsName : '${abbrs.operationalInsightsWorkspaces}${token}'
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
  }
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: !empty(applicationInsightsName) ? applicationInsightsName : '${abbrs.insightsComponents}${token}'
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: logAnalytics.id
    // Entra ID ingestion only: the connection string alone cannot send telemetry, so it is
    // not a secret. The app authenticates with APPLICATIONINSIGHTS_AUTHENTICATION_STRING.
    DisableLocalAuth: true
  }
}

resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, identity.id, monitoringMetricsPublisherRoleId)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisherRoleId)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

// ---- host storage (AzureWebJobsStorage + deployment packages) ----
resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  //checkov:skip=CKV_AZURE_35: Flex Consumption without VNet integration reaches its host storage over the public endpoint, so the default action must be Allow; shared keys are disabled, so only Entra ID principals with a data role get in. See deploy/README.md (private deployment).
  //checkov:skip=CKV_AZURE_59: same reason as CKV_AZURE_35: public endpoint needed without VNet integration; key auth is off.
  //checkov:skip=CKV_AZURE_43: the name is computed ('st' + uniqueString = 15 lowercase alphanumerics, valid); checkov cannot evaluate the expression.
  //checkov:skip=CKV_AZURE_206: host storage holds leases/timers and rebuildable deployment packages; LRS is enough (change the sku for ZRS/GRS).
  name: hostStorageName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource storageBlobDataOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, identity.id, storageBlobDataOwnerRoleId)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwnerRoleId)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource storageQueueDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, identity.id, storageQueueDataContributorRoleId)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageQueueDataContributorRoleId)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

resource storageTableDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, identity.id, storageTableDataContributorRoleId)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributorRoleId)
    principalId: identity.properties.principalId
    principalType: 'ServicePrincipal'
  }
}

var subscriberStorageRoleIds = deploySubscriber ? [
  storageBlobDataOwnerRoleId
  storageQueueDataContributorRoleId
  storageTableDataContributorRoleId
] : []

resource subscriberStorageRoles 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in subscriberStorageRoleIds: {
  name: guid(storage.id, subscriberAppName, roleId)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: deploySubscriber ? subscriberIdentity.properties.principalId : ''
    principalType: 'ServicePrincipal'
  }
}]

resource subscriberMetricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (deploySubscriber) {
  name: guid(applicationInsights.id, subscriberAppName, monitoringMetricsPublisherRoleId)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisherRoleId)
    principalId: deploySubscriber ? subscriberIdentity.properties.principalId : ''
    principalType: 'ServicePrincipal'
  }
}

// ---- data plane ----
module cosmos 'modules/cosmos.bicep' = {
  name: 'cosmos'
  params: {
    accountName: !empty(cosmosAccountName) ? cosmosAccountName : '${abbrs.documentDBDatabaseAccounts}${token}'
    location: location
    tags: tags
    databaseName: cosmosDatabaseName
    containerName: cosmosContainerName
    leaseContainerName: cosmosLeaseContainerName
    serverless: cosmosServerless
    projectionContainerName: deploySubscriber ? projectionContainerName : ''
    projectionContributorPrincipalIds: [for p in subscriberPrincipals: p.id]
    dataContributorPrincipalIds: concat([
      identity.properties.principalId
    ], empty(principalId) ? [] : [
      principalId
    ])
  }
}

// ---- the claim check's payloads (bodies too large for a message) ----
module payloads 'modules/payloads.bicep' = {
  name: 'payloads'
  params: {
    accountName: payloadStorageName
    location: location
    tags: tags
    retentionDays: payloadRetentionDays
    // The relay writes (the app's identity: one identity for the api and relay apps).
    contributorPrincipals: concat([
      appPrincipal
    ], developerPrincipals)
    // Subscribers read.
    readerPrincipals: subscriberPrincipals
  }
}

// The subscriptions whose dead letters the operators' routes recover (OUTBOX_SUBSCRIPTIONS), the
// subscriber's with its projection container (what it holds and applied: the journey).
var watchedSubscriptions = deploySubscriber ? '${subscriberSubscriptionName}=${projectionContainerName},${serviceBusSubscriptionName}' : serviceBusSubscriptionName

module serviceBus 'modules/servicebus.bicep' = {
  name: 'servicebus'
  params: {
    namespaceName: !empty(serviceBusNamespaceName) ? serviceBusNamespaceName : '${abbrs.serviceBusNamespaces}${token}'
    location: location
    tags: tags
    skuName: serviceBusSku
    topicName: serviceBusTopicName
    subscriptionName: serviceBusSubscriptionName
    projectionSubscriptionName: deploySubscriber ? subscriberSubscriptionName : ''
    projectionReceiverPrincipals: subscriberPrincipals
    projectionReceiverRights: subscriberServiceBusRights
    duplicateDetectionHistoryTimeWindow: duplicateDetectionHistoryTimeWindow
    senderPrincipals: concat([
      appPrincipal
    ], developerPrincipals)
    receiverPrincipals: developerPrincipals
    deadLetterPrincipals: [
      appPrincipal
    ]
  }
}

// ---- compute ----
@description('Sign-in for the operators\' console: an Entra ID app registration with the app role Outbox.Operator (given to principalId when it is a user), and App Service Authentication on the app that serves the operators\' routes (operators-signin.bicep). Needs the right to register applications in the tenant. false: none; the operators\' routes then take the admin key only, and the console page answers 401.')
param operatorsSignIn bool = true

// The console runs where the operators' routes do: in the relay app when it is split off.
var consoleAppName = splitRelay ? relayAppName : appName

module operatorsSignInRegistration 'modules/operators-signin.bicep' = if (operatorsSignIn) {
  name: 'operators-signin'
  params: {
    registrationName: 'outbox-operators-${environmentName}-${token}'
    consoleHostName: '${consoleAppName}.azurewebsites.net'
    identityPrincipalId: identity.properties.principalId
    operatorPrincipalId: principalType == 'User' ? principalId : ''
  }
}
var operatorsClientId = operatorsSignIn ? operatorsSignInRegistration.outputs.clientId : ''

module api 'modules/functionapp.bicep' = {
  name: 'functionapp-api'
  params: {
    name: appName
    planName: '${abbrs.webServerFarms}api-${token}'
    location: location
    pythonVersion: pythonVersion
    hostingPlan: hostingPlan
    tags: tags
    azdServiceName: 'api'
    appRole: splitRelay ? 'api' : 'all'
    relayHere: relayHosting == 'functions'
    operatorsSignInClientId: splitRelay ? '' : operatorsClientId
    corsAllowedOrigins: corsOrigins
    corsSupportCredentials: corsSupportCredentials
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    storageAccountName: storage.name
    identityId: identity.id
    identityClientId: identity.properties.clientId
    applicationInsightsConnectionString: applicationInsights.properties.ConnectionString
    cosmosEndpoint: cosmos.outputs.endpoint
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    cosmosDatabase: cosmos.outputs.databaseName
    cosmosContainer: cosmos.outputs.containerName
    cosmosLeaseContainer: cosmos.outputs.leaseContainerName
    serviceBusTopic: serviceBus.outputs.topicName
    eventTtlSeconds: eventTtlSeconds
    idempotencyTtlSeconds: idempotencyTtlSeconds
    cloudEventsSourceBase: cloudEventsSourceBase
    feedPollDelayMs: feedPollDelayMs
    leaseAcquireIntervalMs: leaseAcquireIntervalMs
    leaseExpirationIntervalMs: leaseExpirationIntervalMs
    leaseRenewIntervalMs: leaseRenewIntervalMs
    maxItemsPerInvocation: maxItemsPerInvocation
    backlogEstimateSchedule: backlogEstimateSchedule
    payloadBlobEndpoint: payloads.outputs.blobEndpoint
    payloadContainer: payloads.outputs.containerName
    payloadMaxBytes: payloadMaxBytes
    serviceBusMaxMessageBytes: serviceBusMaxMessageBytes
    watchedSubscriptions: watchedSubscriptions
  }
  dependsOn: [
    storageBlobDataOwner
    storageQueueDataContributor
    storageTableDataContributor
    metricsPublisher
  ]
}

module relay 'modules/functionapp.bicep' = if (splitRelay) {
  name: 'functionapp-relay'
  params: {
    name: relayAppName
    planName: '${abbrs.webServerFarms}relay-${token}'
    location: location
    pythonVersion: pythonVersion
    hostingPlan: hostingPlan
    tags: tags
    azdServiceName: 'relay'
    appRole: 'relay'
    relayHere: relayHosting == 'functions'
    operatorsSignInClientId: operatorsClientId
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    storageAccountName: storage.name
    identityId: identity.id
    identityClientId: identity.properties.clientId
    applicationInsightsConnectionString: applicationInsights.properties.ConnectionString
    cosmosEndpoint: cosmos.outputs.endpoint
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    cosmosDatabase: cosmos.outputs.databaseName
    cosmosContainer: cosmos.outputs.containerName
    cosmosLeaseContainer: cosmos.outputs.leaseContainerName
    serviceBusTopic: serviceBus.outputs.topicName
    eventTtlSeconds: eventTtlSeconds
    idempotencyTtlSeconds: idempotencyTtlSeconds
    cloudEventsSourceBase: cloudEventsSourceBase
    feedPollDelayMs: feedPollDelayMs
    leaseAcquireIntervalMs: leaseAcquireIntervalMs
    leaseExpirationIntervalMs: leaseExpirationIntervalMs
    leaseRenewIntervalMs: leaseRenewIntervalMs
    maxItemsPerInvocation: maxItemsPerInvocation
    backlogEstimateSchedule: backlogEstimateSchedule
    payloadBlobEndpoint: payloads.outputs.blobEndpoint
    payloadContainer: payloads.outputs.containerName
    payloadMaxBytes: payloadMaxBytes
    serviceBusMaxMessageBytes: serviceBusMaxMessageBytes
    watchedSubscriptions: watchedSubscriptions
  }
  dependsOn: [
    storageBlobDataOwner
    storageQueueDataContributor
    storageTableDataContributor
    metricsPublisher
  ]
}

module subscriber 'modules/subscriberapp.bicep' = if (deploySubscriber) {
  name: 'functionapp-subscriber'
  params: {
    name: subscriberAppName
    planName: '${abbrs.webServerFarms}subscriber-${token}'
    location: location
    pythonVersion: pythonVersion
    tags: tags
    instanceMemoryMB: instanceMemoryMB
    storageAccountName: storage.name
    identityId: deploySubscriber ? subscriberIdentity.id : ''
    identityClientId: deploySubscriber ? subscriberIdentity.properties.clientId : ''
    applicationInsightsConnectionString: applicationInsights.properties.ConnectionString
    cosmosEndpoint: cosmos.outputs.endpoint
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    cosmosDatabase: cosmos.outputs.databaseName
    projectionContainer: projectionContainerName
    serviceBusTopic: serviceBus.outputs.topicName
    subscriberSubscription: subscriberSubscriptionName
    inboxTtlSeconds: inboxTtlSeconds
    payloadBlobEndpoint: payloads.outputs.blobEndpoint
    payloadContainer: payloads.outputs.containerName
  }
  dependsOn: [
    subscriberStorageRoles
    subscriberMetricsPublisher
  ]
}

// ---- the relay on Container Apps (relayHosting containerApps): same identity, settings, leases ----
module relayContainer 'modules/relay-containerapp.bicep' = if (relayHosting == 'containerApps') {
  name: 'relay-containerapp'
  params: {
    name: '${abbrs.appContainerApps}relay-${token}'
    environmentName: '${abbrs.appManagedEnvironments}${token}'
    location: location
    tags: tags
    image: relayImage
    registryName: relayRegistryName
    logAnalyticsId: logAnalytics.id
    identityId: identity.id
    identityClientId: identity.properties.clientId
    applicationInsightsConnectionString: applicationInsights.properties.ConnectionString
    cosmosEndpoint: cosmos.outputs.endpoint
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    payloadBlobEndpoint: payloads.outputs.blobEndpoint
    payloadContainer: payloads.outputs.containerName
    payloadMaxBytes: payloadMaxBytes
    serviceBusMaxMessageBytes: serviceBusMaxMessageBytes
    cosmosDatabase: cosmos.outputs.databaseName
    cosmosContainer: cosmos.outputs.containerName
    cosmosLeaseContainer: cosmos.outputs.leaseContainerName
    serviceBusTopic: serviceBus.outputs.topicName
    eventTtlSeconds: eventTtlSeconds
    cloudEventsSourceBase: cloudEventsSourceBase
    feedPollDelayMs: feedPollDelayMs
    leaseAcquireIntervalMs: leaseAcquireIntervalMs
    leaseExpirationIntervalMs: leaseExpirationIntervalMs
    leaseRenewIntervalMs: leaseRenewIntervalMs
    maxItemsPerInvocation: maxItemsPerInvocation
    backlogEstimateSchedule: backlogEstimateSchedule
    watchedSubscriptions: watchedSubscriptions
    maxReplicas: relayMaxReplicas
    scaleOnLag: relayScaling == 'keda'
  }
  dependsOn: [
    metricsPublisher
  ]
}

// ---- monitoring: outbox alert rules and workbook ----
module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: tags
    namePrefix: environmentName
    applicationInsightsId: applicationInsights.id
    actionGroupId: alertActionGroupId
    oldestPendingAgeThresholdSeconds: oldestPendingAgeAlertSeconds
  }
}

// ---- outputs (azd stores them in .azure/<env>/.env) ----
output AZURE_LOCATION string = location
output AZURE_FUNCTION_APP_NAME string = api.outputs.name
output AZURE_FUNCTION_APP_URL string = api.outputs.url
output AZURE_RELAY_FUNCTION_APP_NAME string = splitRelay ? relayAppName : api.outputs.name
output OUTBOX_CONSOLE_URL string = 'https://${consoleAppName}.azurewebsites.net/api/outbox/console'
output OUTBOX_OPERATORS_CLIENT_ID string = operatorsClientId
output AZURE_MANAGED_IDENTITY_CLIENT_ID string = identity.properties.clientId
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output COSMOS_DATABASE string = cosmos.outputs.databaseName
output COSMOS_CONTAINER string = cosmos.outputs.containerName
output COSMOS_LEASE_CONTAINER string = cosmos.outputs.leaseContainerName
output SERVICEBUS_FULLY_QUALIFIED_NAMESPACE string = serviceBus.outputs.fullyQualifiedNamespace
output SERVICEBUS_TOPIC string = serviceBus.outputs.topicName
output SERVICEBUS_SUBSCRIPTION string = serviceBus.outputs.subscriptionName
output APPLICATIONINSIGHTS_NAME string = applicationInsights.name
output AZURE_RELAY_CONTAINER_APP_NAME string = relayHosting == 'containerApps' ? relayContainer.outputs.name : ''
output AZURE_SUBSCRIBER_FUNCTION_APP_NAME string = deploySubscriber ? subscriberAppName : ''
output SUBSCRIBER_SUBSCRIPTION string = deploySubscriber ? subscriberSubscriptionName : ''
output PROJECTION_CONTAINER string = deploySubscriber ? projectionContainerName : ''
output OUTBOX_PAYLOAD_BLOB_ENDPOINT string = payloads.outputs.blobEndpoint
output OUTBOX_PAYLOAD_CONTAINER string = payloads.outputs.containerName
