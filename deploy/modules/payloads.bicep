// The claim check's payload store: a storage account of its own with one private container, where
// the relay puts the body of an event too large for a Service Bus message (after the commit, under
// <aggregateType>/<aggregateId>/<eventId>) and subscribers read it by the message's
// cloudEvents_dataref. Identity-based access only (no shared keys, no public blobs, no SAS):
// Storage Blob Data Contributor for the relay's identity, Storage Blob Data Reader for the
// subscribers', both scoped to the container. A lifecycle rule deletes a payload
// `retentionDays` after it was last written: longer than the topic's message time to live, so a
// message never outlives its payload (a re-drive or a relay retry writes it again, and so
// renews it).

@description('Storage account name (globally unique, 3-24 lowercase letters and digits).')
param accountName string

@description('Region of the account.')
param location string

@description('Tags for every resource.')
param tags object = {}

@description('The private container of the payloads (OUTBOX_PAYLOAD_CONTAINER).')
param containerName string = 'outbox-payloads'

@description('Days after its last write a payload is deleted: longer than the topic\'s message time to live and the subscriptions\' (14 days by default), with room for a dead-letter re-drive.')
@minValue(1)
param retentionDays int = 30

@description('Principals that write payloads (the relay): [{ id, type }], given Storage Blob Data Contributor on the container.')
param contributorPrincipals array = []

@description('Principals that read payloads (subscribers): [{ id, type }], given Storage Blob Data Reader on the container.')
param readerPrincipals array = []

var storageBlobDataContributorRoleId = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
var storageBlobDataReaderRoleId = '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  //checkov:skip=CKV_AZURE_35: Flex Consumption without VNet integration reaches storage over the public endpoint, so the default action must be Allow; shared keys are disabled, so only Entra ID principals with a data role on the container get in. See deploy/README.md (private deployment).
  //checkov:skip=CKV_AZURE_59: same reason as CKV_AZURE_35: public endpoint needed without VNet integration; key auth is off.
  //checkov:skip=CKV_AZURE_43: the name is computed ('stpl' + uniqueString, valid); checkov cannot evaluate the expression.
  //checkov:skip=CKV_AZURE_206: payloads are copies of event documents kept in Cosmos DB until their TTL (and re-written by a re-drive); LRS is enough (change the sku for ZRS/GRS).
  //checkov:skip=CKV_AZURE_33: no queues are used in this account (blobs only), so there is no queue service logging to enable.
  //checkov:skip=CKV2_AZURE_1: encryption at rest with Microsoft-managed keys, as for every account here; customer-managed keys need a Key Vault this template does not create.
  //checkov:skip=CKV2_AZURE_33: no private endpoint without VNet integration (see CKV_AZURE_35).
  name: accountName
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

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
  properties: {
    // A payload deleted by mistake can be restored for a week (the lifecycle rule's deletes too).
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: 7
    }
  }
}

resource container 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: containerName
  properties: {
    publicAccess: 'None'
  }
}

resource lifecycle 'Microsoft.Storage/storageAccounts/managementPolicies@2023-05-01' = {
  parent: account
  name: 'default'
  properties: {
    policy: {
      rules: [
        {
          name: 'delete-outbox-payloads'
          enabled: true
          type: 'Lifecycle'
          definition: {
            filters: {
              blobTypes: [
                'blockBlob'
              ]
              prefixMatch: [
                '${containerName}/'
              ]
            }
            actions: {
              baseBlob: {
                delete: {
                  daysAfterModificationGreaterThan: retentionDays
                }
              }
            }
          }
        }
      ]
    }
  }
}

resource contributors 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principal in contributorPrincipals: {
  name: guid(container.id, principal.id, storageBlobDataContributorRoleId)
  scope: container
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributorRoleId)
    principalId: principal.id
    principalType: principal.type
  }
}]

resource readers 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principal in readerPrincipals: {
  name: guid(container.id, principal.id, storageBlobDataReaderRoleId)
  scope: container
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataReaderRoleId)
    principalId: principal.id
    principalType: principal.type
  }
}]

output accountName string = account.name
output blobEndpoint string = account.properties.primaryEndpoints.blob
output containerName string = container.name
