// Outbox monitoring: alert rules and a workbook on the OpenTelemetry metrics the app emits
// (customMetrics in Application Insights). The metric names are loaded from
// metric-names.json, which tests/deploy/test_monitoring.py holds equal to
// application/outbox/telemetry.py (the one source of truth).

@description('Region of the alert rules and the workbook.')
param location string

@description('Tags for every resource.')
param tags object = {}

@description('Resource id of the Application Insights component the app sends telemetry to.')
param applicationInsightsId string

@description('Resource id of the action group the alerts notify (empty: alerts fire without notifying anyone).')
param actionGroupId string = ''

@description('Alert when the oldest pending event is older than this many seconds.')
@minValue(60)
param oldestPendingAgeThresholdSeconds int = 300

@description('Prefix of the alert rule and workbook names.')
param namePrefix string

var metricNames = loadJsonContent('metric-names.json')
var actions = empty(actionGroupId) ? {} : {
  actionGroups: [
    actionGroupId
  ]
}

resource oldestPendingAge 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${namePrefix}-outbox-oldest-pending-age'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Outbox: oldest pending event older than ${oldestPendingAgeThresholdSeconds} s'
    description: 'The relay is behind or not running: events wait in the outbox (and expire unrelayed at EVENT_TTL_SECONDS).'
    severity: 2
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "${metricNames.oldestPendingAge}" and tostring(customDimensions["outbox.lease"]) == "${metricNames.allLeases}" | summarize age = max(valueMax)'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'age'
          operator: 'GreaterThan'
          threshold: oldestPendingAgeThresholdSeconds
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: actions
  }
}

resource quarantine 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${namePrefix}-outbox-quarantine'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Outbox: an event was quarantined'
    description: 'An event document could not become a message and was set aside; see the quarantine.'
    severity: 2
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "${metricNames.quarantined}" | summarize n = sum(valueSum)'
          timeAggregation: 'Total'
          metricMeasureColumn: 'n'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: actions
  }
}

resource relayFailures 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${namePrefix}-outbox-relay-failures'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Outbox: relay failing for 5 minutes'
    description: 'Every minute for 5 minutes the relay raised (Service Bus unreachable, no permission, ...). Events are retried, not lost, until EVENT_TTL_SECONDS.'
    severity: 1
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT1M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "${metricNames.relayFailures}" | summarize n = sum(valueSum)'
          timeAggregation: 'Total'
          metricMeasureColumn: 'n'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 5
            minFailingPeriodsToAlert: 5
          }
        }
      ]
    }
    actions: actions
  }
}

resource relayStalled 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${namePrefix}-outbox-relay-stalled'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Outbox: relay stalled'
    description: 'Events are pending and not moving (waiting longer than the poll delay and OUTBOX_RELAY_STALL_SECONDS), or the relay cannot start: the backlog timer says so each minute (outbox.relay.stalled = 1; its log line names the state). The operators\' status and console say since when and which dependency does not answer.'
    severity: 1
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "${metricNames.relayStalled}" | summarize stalled = max(valueMax)'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'stalled'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: actions
  }
}

resource vanishedDeadLetters 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${namePrefix}-outbox-vanished-dead-letters'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Outbox: a dead letter left its queue without being applied'
    description: 'A dead letter of a watched subscription is gone and its subscriber did not apply it (resent with the same MessageId inside the duplicate window, or deleted): re-drive it to that subscription, or release the version (the operators\' console says which).'
    severity: 2
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "${metricNames.vanishedDeadLetters}" | summarize n = max(valueMax)'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'n'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: actions
  }
}

var lagQuery = 'customMetrics | where name == "${metricNames.relayLag}" | summarize mean_s = sum(valueSum) / sum(valueCount), p50_of_max_s = percentile(valueMax, 50), p95_of_max_s = percentile(valueMax, 95), max_s = max(valueMax) by bin(timestamp, 5m) | render timechart'
var throughputQuery = 'customMetrics | where name in ("${metricNames.sentMessages}", "${metricNames.offloaded}") | summarize n = sum(valueSum) by name, bin(timestamp, 5m) | render timechart'
var backlogQuery = 'customMetrics | where name in ("${metricNames.pending}", "${metricNames.oldestPendingAge}") and tostring(customDimensions["outbox.lease"]) == "${metricNames.allLeases}" | summarize value = max(valueMax) by name, bin(timestamp, 5m) | render timechart'
var problemsQuery = 'customMetrics | where name in ("${metricNames.quarantined}", "${metricNames.relayFailures}") | summarize n = sum(valueSum) by name, bin(timestamp, 5m) | render timechart'

var workbookContent = {
  version: 'Notebook/1.0'
  items: [
    {
      type: 1
      content: {
        json: '## Outbox\nRelay lag (event creation to acceptance by Service Bus), throughput, backlog and quarantines. Lag percentiles are over the per-export maxima: Application Insights keeps sum, count, min and max of a histogram, not its buckets.'
      }
      name: 'title'
    }
    {
      type: 3
      content: {
        version: 'KqlItem/1.0'
        query: lagQuery
        size: 0
        title: 'Relay lag (s)'
        queryType: 0
        resourceType: 'microsoft.insights/components'
      }
      name: 'lag'
    }
    {
      type: 3
      content: {
        version: 'KqlItem/1.0'
        query: throughputQuery
        size: 0
        title: 'Messages sent'
        queryType: 0
        resourceType: 'microsoft.insights/components'
      }
      name: 'throughput'
    }
    {
      type: 3
      content: {
        version: 'KqlItem/1.0'
        query: backlogQuery
        size: 0
        title: 'Backlog: pending changes and oldest pending age (s)'
        queryType: 0
        resourceType: 'microsoft.insights/components'
      }
      name: 'backlog'
    }
    {
      type: 3
      content: {
        version: 'KqlItem/1.0'
        query: problemsQuery
        size: 0
        title: 'Quarantined events and relay failures'
        queryType: 0
        resourceType: 'microsoft.insights/components'
      }
      name: 'problems'
    }
  ]
  isLocked: false
}

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(resourceGroup().id, namePrefix, 'outbox-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: '${namePrefix} outbox'
    category: 'workbook'
    sourceId: applicationInsightsId
    serializedData: string(workbookContent)
  }
}

output alertRuleIds array = [
  oldestPendingAge.id
  quarantine.id
  relayFailures.id
  relayStalled.id
  vanishedDeadLetters.id
]
output workbookId string = workbook.id
