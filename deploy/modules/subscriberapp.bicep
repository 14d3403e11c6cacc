// The subscriber Function App (subscriber/): Flex Consumption (Linux, Python), its own plan and
// deployment-package container, running as its own user-assigned identity, which holds only
// Service Bus Data Receiver on its subscription and Cosmos DB data access (assigned in
// main.bicep and the cosmos/servicebus modules). No keys or connection strings. Its HTTP
// functions (the projection's reads, GET /api/projections/contacts[/{id}]) take a function key.

@description('Function App name (globally unique).')
param name string

@description('Region of the app and its plan.')
param location string

@description('Tags for every resource (azd-service-name is added here).')
param tags object = {}

@description('azd service name this app is deployed as (azure.yaml).')
param azdServiceName string = 'subscriber'

@description('Flex Consumption plan name.')
param planName string

@description('Python version of the Functions runtime (Flex Consumption: 3.11 - 3.14; 3.11/3.12 run azure-functions 1.x, 3.13/3.14 2.x).')
@allowed([
  '3.11'
  '3.12'
  '3.13'
  '3.14'
])
param pythonVersion string = '3.13'

@description('Maximum number of instances the app scales out to.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Memory of each instance.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Existing storage account for the host (AzureWebJobsStorage) and the deployment package.')
param storageAccountName string

@description('Resource id of the subscriber\'s user-assigned managed identity.')
param identityId string

@description('Client id of that identity.')
param identityClientId string

@description('Application Insights connection string (not a secret: Entra ID auth only).')
param applicationInsightsConnectionString string

@description('Cosmos DB account endpoint.')
param cosmosEndpoint string

@description('Service Bus fully qualified namespace.')
param serviceBusFullyQualifiedNamespace string

@description('Blob service endpoint of the claim check\'s payload account, where messages with a cloudEvents_dataref have their data.')
param payloadBlobEndpoint string

@description('The payloads\' private container (OUTBOX_PAYLOAD_CONTAINER).')
param payloadContainer string = 'outbox-payloads'

param cosmosDatabase string
param projectionContainer string
param serviceBusTopic string
param subscriberSubscription string

@description('Seconds an inbox record lives (INBOX_TTL_SECONDS): longer than any redelivery or re-drive of an event.')
@minValue(3600)
param inboxTtlSeconds int = 1209600

var deploymentContainerName = 'app-package-${take(toLower(name), 32)}-${take(uniqueString(name, resourceGroup().id), 7)}'

var appSettings = [
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
  // The Service Bus trigger (Functions extension), identity based.
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
  // The claim check: the data of a message with a cloudEvents_dataref (read only).
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
    name: 'AZURE_CLIENT_ID'
    value: identityClientId
  }
  {
    name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
    value: applicationInsightsConnectionString
  }
  {
    name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
    value: 'ClientId=${identityClientId};Authorization=AAD'
  }
  {
    name: 'PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY'
    value: 'true'
  }
  // The subscriber's own settings (subscriber/contacts_projection/settings.py).
  {
    name: 'COSMOS_DATABASE'
    value: cosmosDatabase
  }
  {
    name: 'PROJECTION_CONTAINER'
    value: projectionContainer
  }
  {
    name: 'INBOX_TTL_SECONDS'
    value: string(inboxTtlSeconds)
  }
  {
    name: 'SERVICEBUS_TOPIC'
    value: serviceBusTopic
  }
  {
    name: 'SUBSCRIBER_SUBSCRIPTION'
    value: subscriberSubscription
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

resource subscriberPlan 'Microsoft.Web/serverfarms@2024-04-01' = {
  //checkov:skip=CKV_AZURE_225: zone redundancy on Flex Consumption is region-dependent and needs always-ready instances (cost); scale-to-zero is the default here.
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

resource subscriberSite 'Microsoft.Web/sites@2024-04-01' = {
  //checkov:skip=CKV_AZURE_212: Flex Consumption scales per function group and to zero; a minimum instance count is configured with alwaysReady, not siteConfig.
  //checkov:skip=CKV_AZURE_213: App Service health check does not apply to Flex Consumption; the subscriber's HTTP functions are the projection's reads.
  //checkov:skip=CKV_AZURE_222: the subscriber's only HTTP functions are the projection's reads (GET, function key over HTTPS). Add private endpoints for a private deployment.
  //checkov:skip=CKV_AZURE_17: callers of the projection's reads authenticate with a function key, not client certificates.
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
    serverFarmId: subscriberPlan.id
    httpsOnly: true
    publicNetworkAccess: 'Enabled'
    clientCertEnabled: false
    functionAppConfig: {
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
    siteConfig: {
      minTlsVersion: '1.2'
      http20Enabled: true
      ftpsState: 'Disabled'
      appSettings: appSettings
    }
  }
  dependsOn: [
    deploymentContainer
  ]
}

output name string = subscriberSite.name
