// The relay as a container (`cosmos-outbox relay`, deploy/relay-container/Dockerfile) on Azure
// Container Apps, beside the Functions deployment: the same settings the Function App reads, the
// same user-assigned identity (its Cosmos DB data role, Service Bus sender, payload blobs and
// Monitoring Metrics Publisher are assigned in main.bicep and the modules), and the same lease
// container and processor name (OUTBOX_PROCESSOR_NAME) as the Functions trigger: the relay moves between
// the trigger and these replicas on its checkpoints (docs/relay-anywhere.md).
//
// Scaling: KEDA's `azure-cosmosdb` scaler reads the leases (.NET's schema, which
// cosmos-changefeed writes) and the change feed past each checkpoint: one replica per
// `lagPerReplica` pending changes, at most `maxReplicas` (more replicas than physical partitions
// hold no lease: keep it at or under the container's partition count). It authenticates with
// the app's user-assigned identity (the account has keys disabled). Probes: /live (liveness),
// /ready (readiness: configured and listening) on the probes' port; /health (moving) is for
// on call, not for the platform (a stalled relay is not cured by a restart).

@description('Container app name.')
param name string

@description('Container Apps environment name.')
param environmentName string

@description('Region of the app and its environment.')
param location string

@description('Tags for every resource (azd-service-name is added to the app).')
param tags object = {}

@description('azd service name this app is deployed as (azure.yaml).')
param azdServiceName string = 'relay-container'

@description('The relay image (deploy/relay-container/Dockerfile), e.g. <registry>.azurecr.io/cosmos-outbox-relay:0.5.0.')
param image string

@description('An Azure Container Registry of this resource group the image is pulled from with the identity (given AcrPull on it here); empty: a public image.')
param registryName string = ''

@description('Log Analytics workspace (resource id): the environment\'s logs, sent by Azure Monitor (no workspace key).')
param logAnalyticsId string

@description('User-assigned identity (resource id) the relay runs as and KEDA reads the leases with.')
param identityId string

@description('Its client id (DefaultAzureCredential, the connections\' __clientId).')
param identityClientId string

param applicationInsightsConnectionString string
param cosmosEndpoint string
param serviceBusFullyQualifiedNamespace string
param payloadBlobEndpoint string
param payloadContainer string = 'outbox-payloads'
param payloadMaxBytes int = 2097152
param serviceBusMaxMessageBytes int = 262144
param cosmosDatabase string
param cosmosContainer string
param cosmosLeaseContainer string
param serviceBusTopic string
param eventTtlSeconds int = 864000
param cloudEventsSourceBase string = ''
param feedPollDelayMs int = 1000
@description('The relay\'s lease intervals in milliseconds (LEASE_*_INTERVAL_MS, the trigger\'s binding properties of those names); 0: the change feed processor\'s own.')
@minValue(0)
param leaseAcquireIntervalMs int = 0
@minValue(0)
param leaseExpirationIntervalMs int = 0
@minValue(0)
param leaseRenewIntervalMs int = 0

param maxItemsPerInvocation int = 100
param backlogEstimateSchedule string = '0 * * * * *'

@description('The topic\'s subscriptions whose dead letters the operators watch (OUTBOX_SUBSCRIPTIONS, as the Function App\'s): the relay drains their dead-letter queues into failure records, and its bulk operations act on them.')
param watchedSubscriptions string = ''

@description('Queues whose dead letters the operators watch too (OUTBOX_DEAD_LETTER_QUEUES, as the Function App\'s).')
param deadLetterQueues string = ''

@description('Drain the watched dead-letter queues into failure records here, the relay\'s host (OUTBOX_FAILURE_INGEST true: a receiver per dead-letter path; the Function Apps then read the records, OUTBOX_FAILURE_INGEST elsewhere). false: none (the operators\' routes peek the queues).')
param failureIngest bool = true

@description('Seconds an archived or resolved failure record is kept (OUTBOX_FAILURE_RETENTION_SECONDS, as the Function App\'s).')
@minValue(3600)
param failureRetentionSeconds int = 1209600

@description('The relay\'s processor\'s name (its leases\' prefix): the Functions trigger\'s (functionapp.bicep), so both share the leases.')
param processorName string = 'outbox.'

@description('Replicas kept when nothing is pending (0: scale to zero; events then wait for KEDA\'s next poll, 30 s).')
@minValue(0)
param minReplicas int = 1

@description('Replicas at most (at most one per physical partition holds a lease).')
@minValue(1)
param maxReplicas int = 10

@description('Pending changes per replica (KEDA changeFeedLagThreshold).')
@minValue(1)
param lagPerReplica int = 100

@description('Scale on the leases\' lag with KEDA\'s azure-cosmosdb scaler (KEDA 2.21+); false: maxReplicas replicas, no rule (the fallback where the managed KEDA lacks the scaler).')
param scaleOnLag bool = true

@description('The probes\' port (cosmos-outbox relay --port).')
param probesPort int = 8080

var acrPullRoleId = '7f951dda-4ed3-4680-a7ca-be7a7ee4d3a5'

// KEDA's azure-cosmosdb rule on the leases' lag (scaleOnLag): it reads the lease documents whose
// ids start with processorName + the account's host up to its first dot + '.' (a host without a
// dot, localhost, matches none: docs/changefeed-deploying.md), and each lease's change feed past
// its checkpoint. KEDA 2.21+ only; without it, scaleOnLag false runs maxReplicas replicas.
var changeFeedLagRule = {
  name: 'change-feed-lag'
  custom: {
    type: 'azure-cosmosdb'
    metadata: {
      endpoint: cosmosEndpoint
      databaseId: cosmosDatabase
      containerId: cosmosContainer
      leaseDatabaseId: cosmosDatabase
      leaseContainerId: cosmosLeaseContainer
      processorName: processorName
      changeFeedLagThreshold: string(lagPerReplica)
      activationChangeFeedLagThreshold: '0'
    }
    identity: identityId
  }
}

resource registry 'Microsoft.ContainerRegistry/registries@2023-07-01' existing = if (!empty(registryName)) {
  name: empty(registryName) ? 'none' : registryName
}

resource acrPull 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(registryName)) {
  name: guid(resourceGroup().id, registryName, identityId, acrPullRoleId)
  scope: registry
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', acrPullRoleId)
    principalId: reference(identityId, '2023-01-31').principalId
    principalType: 'ServicePrincipal'
  }
}

resource environment 'Microsoft.App/managedEnvironments@2025-01-01' = {
  name: environmentName
  location: location
  tags: tags
  properties: {
    appLogsConfiguration: {
      destination: 'azure-monitor'
    }
    workloadProfiles: [
      {
        name: 'Consumption'
        workloadProfileType: 'Consumption'
      }
    ]
  }
}

resource environmentLogs 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'logs-to-workspace'
  scope: environment
  properties: {
    workspaceId: logAnalyticsId
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
  }
}

// The Function App's settings the relay reads (functionapp.bicep), and nothing else.
var relaySettings = [
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
  {
    name: 'AZURE_CLIENT_ID'
    value: identityClientId
  }
  // The command exports its telemetry to Application Insights itself (the Azure Monitor distro:
  // the image installs cosmos-outbox[relay,azure-monitor]), with Entra ID auth.
  {
    name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
    value: applicationInsightsConnectionString
  }
  {
    name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
    value: 'ClientId=${identityClientId};Authorization=AAD'
  }
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
    name: 'EVENT_TTL_SECONDS'
    value: string(eventTtlSeconds)
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
    name: 'OUTBOX_PROCESSOR_NAME'
    value: processorName
  }
  // The failures' ingest: what runs the relay drains the watched dead-letter queues (the
  // Function Apps read the records: functionapp.bicep's failureIngestMode, `elsewhere`).
  {
    name: 'OUTBOX_SUBSCRIPTIONS'
    value: watchedSubscriptions
  }
  {
    name: 'OUTBOX_DEAD_LETTER_QUEUES'
    value: deadLetterQueues
  }
  {
    name: 'OUTBOX_FAILURE_INGEST'
    value: string(failureIngest)
  }
  {
    name: 'OUTBOX_FAILURE_RETENTION_SECONDS'
    value: string(failureRetentionSeconds)
  }
]

resource app 'Microsoft.App/containerApps@2025-01-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': azdServiceName })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    environmentId: environment.id
    workloadProfileName: 'Consumption'
    configuration: {
      activeRevisionsMode: 'Single'
      // No ingress: the relay takes no requests; the platform's probes reach the replica.
      registries: empty(registryName) ? [] : [
        {
          server: registry.properties.loginServer
          identity: identityId
        }
      ]
    }
    template: {
      // A replica told to stop gets SIGTERM, then this long to release its leases.
      terminationGracePeriodSeconds: 30
      containers: [
        {
          name: 'relay'
          image: image
          args: [
            'relay'
            '--host'
            '0.0.0.0'
            '--port'
            string(probesPort)
          ]
          env: relaySettings
          resources: {
            cpu: json('0.5')
            memory: '1Gi'
          }
          probes: [
            {
              type: 'Liveness'
              httpGet: {
                path: '/live'
                port: probesPort
              }
              periodSeconds: 10
              failureThreshold: 3
            }
            {
              type: 'Readiness'
              httpGet: {
                path: '/ready'
                port: probesPort
              }
              periodSeconds: 5
              failureThreshold: 3
            }
            {
              type: 'Startup'
              httpGet: {
                path: '/live'
                port: probesPort
              }
              periodSeconds: 2
              failureThreshold: 30
            }
          ]
        }
      ]
      scale: {
        minReplicas: scaleOnLag ? minReplicas : maxReplicas
        maxReplicas: maxReplicas
        rules: scaleOnLag ? [changeFeedLagRule] : []
      }
    }
  }
}

output name string = app.name
output environmentId string = environment.id
