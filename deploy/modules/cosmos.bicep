// Cosmos DB for NoSQL: the outbox store.
// One container holds contacts and their domain events (partition key = contact id, so a contact
// and its events share a logical partition and one transactional batch). The leases container
// keeps the change-feed trigger's checkpoints.
// Keys are disabled (disableLocalAuth): the app uses Entra ID with the data-plane role
// "Cosmos DB Built-in Data Contributor" given to its managed identity.

@description('Cosmos DB account name (globally unique, lowercase).')
param accountName string

@description('Region of the account.')
param location string

@description('Tags for every resource.')
param tags object = {}

@description('Database name (app setting COSMOS_DATABASE).')
param databaseName string

@description('Outbox container name (app setting COSMOS_CONTAINER).')
param containerName string

@description('Lease container name (app setting COSMOS_LEASE_CONTAINER).')
param leaseContainerName string

@description('Projection container of the subscriber app (PROJECTION_CONTAINER); empty: not created.')
param projectionContainerName string = ''

@description('Principal ids given Cosmos DB Built-in Data Contributor on the projection container only (the subscriber); set only with projectionContainerName.')
param projectionContributorPrincipalIds array = []

@description('Serverless (pay per request) when true; otherwise the database gets shared autoscale throughput.')
param serverless bool = true

@description('Autoscale maximum RU/s of the database when not serverless.')
@minValue(1000)
param autoscaleMaxThroughput int = 1000

@description('Principal ids (object ids) given Cosmos DB Built-in Data Contributor on the account.')
param dataContributorPrincipalIds array = []

// Built-in data-plane role: read/write items, query, change feed (no control-plane writes).
var cosmosDataContributorRoleId = '00000000-0000-0000-0000-000000000002'

resource account 'Microsoft.DocumentDB/databaseAccounts@2024-05-15' = {
  //checkov:skip=CKV_AZURE_99: Flex Consumption without VNet integration has no fixed egress IPs, so the account cannot be IP/VNet-restricted; keys are disabled (Entra ID + data-plane RBAC only). For a private deployment add VNet integration and a private endpoint.
  //checkov:skip=CKV_AZURE_101: same reason as CKV_AZURE_99: public network access stays on; local auth is off.
  name: accountName
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: false
      }
    ]
    capabilities: serverless ? [
      {
        name: 'EnableServerless'
      }
    ] : []
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: 'Enabled'
    enableAutomaticFailover: false
    enableFreeTier: false
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2024-05-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
    options: serverless ? {} : {
      autoscaleSettings: {
        maxThroughput: autoscaleMaxThroughput
      }
    }
  }
}

resource contacts 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-05-15' = {
  parent: database
  name: containerName
  properties: {
    resource: {
      id: containerName
      partitionKey: {
        paths: [
          '/partitionKey'
        ]
        kind: 'Hash'
        version: 2
      }
      // -1: TTL is on with no default expiry; event documents carry their own `ttl`.
      defaultTtl: -1
      // Only the paths the app's queries filter on; every other path of every contact and event
      // document is left out, so a write costs fewer RUs. One file, also used by the local
      // provisioning (tools/funcstack.json); docs/indexing.md says which queries it serves.
      indexingPolicy: loadJsonContent('../indexing-policy.json')
    }
  }
}

resource leases 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-05-15' = {
  parent: database
  name: leaseContainerName
  properties: {
    resource: {
      id: leaseContainerName
      partitionKey: {
        paths: [
          '/id'
        ]
        kind: 'Hash'
        version: 2
      }
      // TTL on, no default (nothing expires but what asks to): the change feed processor's
      // initialisation lock carries a ttl, so a lock left by an instance that died while it
      // created the leases goes; with TTL off every instance would wait for it for ever
      defaultTtl: -1
    }
  }
}

// The subscriber's read model: projection, inbox records (per-item ttl) and held events, all
// partitioned by contact id; read by id, but for the journey's look for an event's inbox record
// by its id (`eventId`) when it does not know the aggregate: only `type` and `eventId` indexed.
resource projections 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-05-15' = if (!empty(projectionContainerName)) {
  parent: database
  name: !empty(projectionContainerName) ? projectionContainerName : 'unused'
  properties: {
    resource: {
      id: projectionContainerName
      partitionKey: {
        paths: [
          '/partitionKey'
        ]
        kind: 'Hash'
        version: 2
      }
      defaultTtl: -1
      // One file, also used by the local provisioning (tools/funcstack.json)
      indexingPolicy: loadJsonContent('../projection-indexing-policy.json')
    }
  }
}

resource projectionDataContributor 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = [for principalId in projectionContributorPrincipalIds: {
  parent: account
  name: guid(account.id, principalId, cosmosDataContributorRoleId, projectionContainerName)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${cosmosDataContributorRoleId}'
    principalId: principalId
    scope: '${account.id}/dbs/${databaseName}/colls/${projectionContainerName}'
  }
}]

resource dataContributor 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = [for principalId in dataContributorPrincipalIds: {
  parent: account
  name: guid(account.id, principalId, cosmosDataContributorRoleId)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${cosmosDataContributorRoleId}'
    principalId: principalId
    scope: account.id
  }
}]

output accountName string = account.name
output endpoint string = account.properties.documentEndpoint
output databaseName string = database.name
output containerName string = contacts.name
output leaseContainerName string = leases.name
