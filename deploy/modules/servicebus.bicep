// Service Bus: the topic the relay publishes domain events to.
// Duplicate detection is what makes relay retries harmless: a resent event has the same
// MessageId (the event id) and the topic drops it, as long as the resend happens inside the
// duplicate detection window. The window must therefore exceed the longest gap between a first
// send and its retry (relay retry back-off caps at 1 minute; a host restart or an outage of the
// namespace can stretch that to hours). Both duplicate detection and its window can only be set
// when the topic is created. No autoDeleteOnIdle: an outbox topic that is quiet for a weekend
// must still exist on Monday.

@description('Service Bus namespace name (globally unique).')
param namespaceName string

@description('Region of the namespace.')
param location string

@description('Tags for every resource.')
param tags object = {}

@description('Standard (default) or Premium. Basic has no topics and no duplicate detection.')
@allowed([
  'Standard'
  'Premium'
])
param skuName string = 'Standard'

@description('Messaging units when Premium.')
@allowed([
  1
  2
  4
  8
  16
])
param premiumCapacity int = 1

@description('Topic name (app setting SERVICEBUS_TOPIC).')
param topicName string

@description('ISO 8601 duplicate detection window, 20 s (PT20S) .. 7 days (P7D). Must exceed the longest relay retry gap.')
param duplicateDetectionHistoryTimeWindow string = 'P1D'

@description('ISO 8601 time to live of messages in the topic and subscription.')
param defaultMessageTimeToLive string = 'P14D'

@description('Session-enabled subscription for consumers (FIFO per contact).')
param subscriptionName string

@description('Deliveries before a message moves to the subscription dead-letter queue.')
@minValue(1)
param maxDeliveryCount int = 10

@description('Principals given Azure Service Bus Data Sender on the topic (the relay): [{ id, type }], type ServicePrincipal | User | Group.')
param senderPrincipals array = []

@description('Principals given Azure Service Bus Data Receiver on the subscription (consumers, developers): [{ id, type }].')
param receiverPrincipals array = []

@description('Principals that recover dead letters (the app\'s operators\' routes): Azure Service Bus Data Receiver on each subscription (to peek and receive its dead-letter queue: Azure RBAC scopes an entity, its dead-letter queue with it; no Manage right is needed, counts are peeked). Sending them back needs Data Sender on the topic (senderPrincipals).')
param deadLetterPrincipals array = []

var serviceBusDataSenderRoleId = '69a216fc-b8fb-44d8-bc22-1f3c2b7d47d5'
var serviceBusDataReceiverRoleId = '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
var serviceBusDataOwnerRoleId = '090c5cfd-751d-490a-894a-3ce6f1109419'

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' = {
  name: namespaceName
  location: location
  tags: tags
  sku: {
    name: skuName
    tier: skuName
    capacity: skuName == 'Premium' ? premiumCapacity : null
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
  }
}

resource topic 'Microsoft.ServiceBus/namespaces/topics@2022-10-01-preview' = {
  parent: namespace
  name: topicName
  properties: {
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionHistoryTimeWindow
    supportOrdering: true
    enablePartitioning: false
    enableBatchedOperations: true
    defaultMessageTimeToLive: defaultMessageTimeToLive
    maxSizeInMegabytes: 5120
    // autoDeleteOnIdle deliberately not set: the default is "never".
  }
}

resource subscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2022-10-01-preview' = {
  parent: topic
  name: subscriptionName
  properties: {
    requiresSession: true
    deadLetteringOnMessageExpiration: true
    deadLetteringOnFilterEvaluationExceptions: true
    maxDeliveryCount: maxDeliveryCount
    lockDuration: 'PT1M'
    defaultMessageTimeToLive: defaultMessageTimeToLive
    enableBatchedOperations: true
  }
}

// Every subscription takes what names no target, or names it: a dead letter resubmitted to one
// subscription (outboxTarget, cosmos-outbox's recovery) never reaches the others.
resource subscriptionFilter 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2022-10-01-preview' = {
  parent: subscription
  name: '$Default'
  properties: {
    filterType: 'SqlFilter'
    sqlFilter: {
      sqlExpression: 'NOT EXISTS(outboxTarget) OR outboxTarget = \'${subscriptionName}\''
    }
  }
}

@description('The subscriber app\'s own session-enabled subscription; empty: not created.')
param projectionSubscriptionName string = ''

@description('Principals of the subscriber app, given rights on its subscription only.')
param projectionReceiverPrincipals array = []

@description('What the subscriber may do on its subscription. owner: Azure Service Bus Data Owner, scoped to that subscription (the Functions platform reads the subscription\'s message count, a Manage operation, and scales the trigger by target). receiver: Data Receiver only (least privilege; without Manage the platform falls back to incremental scaling).')
@allowed([
  'owner'
  'receiver'
])
param projectionReceiverRights string = 'owner'

@description('The aggregate type the subscriber projects: its subscription takes only messages whose aggregateType property names it (and messages sent before the property existed, which were all contact events), so another aggregate\'s events never reach it.')
param projectionAggregateType string = 'contact'

resource projectionSubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2022-10-01-preview' = if (!empty(projectionSubscriptionName)) {
  parent: topic
  name: !empty(projectionSubscriptionName) ? projectionSubscriptionName : 'unused'
  properties: {
    requiresSession: true
    deadLetteringOnMessageExpiration: true
    deadLetteringOnFilterEvaluationExceptions: true
    maxDeliveryCount: maxDeliveryCount
    lockDuration: 'PT1M'
    defaultMessageTimeToLive: defaultMessageTimeToLive
    enableBatchedOperations: true
  }
}

// The subscription's default rule (a TrueFilter when created) replaced by a filter on the
// aggregate type: a message must match one rule, so another rule beside $Default would let
// everything through.
resource projectionFilter 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2022-10-01-preview' = if (!empty(projectionSubscriptionName)) {
  parent: projectionSubscription
  name: '$Default'
  properties: {
    filterType: 'SqlFilter'
    sqlFilter: {
      sqlExpression: '(aggregateType = \'${projectionAggregateType}\' OR NOT EXISTS(aggregateType)) AND (NOT EXISTS(outboxTarget) OR outboxTarget = \'${projectionSubscriptionName}\')'
    }
  }
}

// Data Owner on the subscription entity only: receive and settle, and the Manage operations the
// scale controller needs (the message count) on this subscription; nothing on the topic, the
// other subscriptions or the namespace.
var projectionRoleId = projectionReceiverRights == 'owner' ? serviceBusDataOwnerRoleId : serviceBusDataReceiverRoleId

resource projectionReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principal in projectionReceiverPrincipals: {
  name: guid(projectionSubscription.id, principal.id, projectionRoleId)
  scope: projectionSubscription
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', projectionRoleId)
    principalId: principal.id
    principalType: principal.type
  }
}]

// Dead letters: Data Receiver on each subscription (its dead-letter queue is a part of it).
resource deadLetterReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principal in deadLetterPrincipals: {
  name: guid(subscription.id, principal.id, serviceBusDataReceiverRoleId, 'dead-letters')
  scope: subscription
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: principal.id
    principalType: principal.type
  }
}]

resource projectionDeadLetterReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principal in (empty(projectionSubscriptionName) ? [] : deadLetterPrincipals): {
  name: guid(projectionSubscription.id, principal.id, serviceBusDataReceiverRoleId, 'dead-letters')
  scope: projectionSubscription
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: principal.id
    principalType: principal.type
  }
}]

resource sender 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principal in senderPrincipals: {
  name: guid(topic.id, principal.id, serviceBusDataSenderRoleId)
  scope: topic
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSenderRoleId)
    principalId: principal.id
    principalType: principal.type
  }
}]

resource receiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for principal in receiverPrincipals: {
  name: guid(subscription.id, principal.id, serviceBusDataReceiverRoleId)
  scope: subscription
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: principal.id
    principalType: principal.type
  }
}]

output namespaceName string = namespace.name
// serviceBusEndpoint is https://<name>.servicebus.windows.net:443/ (or a sovereign cloud's suffix).
output fullyQualifiedNamespace string = split(split(namespace.properties.serviceBusEndpoint, '//')[1], ':')[0]
output topicName string = topic.name
output subscriptionName string = subscription.name
