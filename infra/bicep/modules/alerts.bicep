// Seven log search alert rules over the handler's own log lines, split by poller so each alert
// names the poller (and, for a poison batch, the batch): five on what the lines say, and the dead
// man's switch, two on the lines that stopped coming (a poller's, and every poller's).
//
// Where the lines are: the handler writes one slog JSON line per tick, per batch and per blocked
// tick to stdout. The Functions host logs each stdout line of a custom handler, verbatim, with the
// category Host.Function.Console at Information level (WorkerProcess / WorkerConsoleLogService in
// azure-functions-host), and its Application Insights logger turns it into a trace: the `traces`
// table, the line in `message`, the category in customDimensions.Category. The line is the whole
// message, so parse_json(message) yields the handler's fields. The console log is written outside
// any invocation scope, so operation_Name and customDimensions.InvocationId are empty on these
// rows: the poller comes from the line itself (its "poller" field), never from the function name.
//
// Scope: the Application Insights component, not its Log Analytics workspace. A rule scoped to
// the component queries the Application Insights schema (traces, message, timestamp,
// customDimensions), sees this app's telemetry only, and its alerts are fired on the component,
// the resource an operator opens for this app. (The same rows are AppTraces, Message, Properties
// and TimeGenerated in the workspace, which other apps may share.)
//
// The queries match the JSON's own fields ("msg", "poller", "outcome", ...), not the category, so
// they do not depend on how the host names its console logger; the `has` term filter before
// parse_json only keeps the parse cheap.
param name string
param location string

@description('The Application Insights component (resource id) the rules query and fire on.')
param insightsId string

@description('Resource id of the action group to notify (Microsoft.Insights/actionGroups). Empty: the rules are created without actions; they still fire, and their alerts show in Azure Monitor > Alerts.')
param actionGroupId string = ''

@description('Fire when the last N tick lines of a poller all have outcome failed or blocked.')
@minValue(1)
@maxValue(100)
param failedTicksInARow int = 3

@description('Fire when a poller\'s latest tick reports lag_seconds (the age of the oldest row waiting) above this.')
@minValue(1)
param lagThresholdSeconds int = 300

@description('Fire when a logical poller\'s latest tick reports slot_retained_bytes (the WAL its replication slot keeps on the database server) above this. Keep it at or below the pollers\' {P}_CDC_MAX_RETAINED (default 1 GiB), and well below the server\'s free disk.')
@minValue(1)
param slotRetainedThresholdBytes int = 1073741824

@description('How often every rule runs its query (ISO 8601).')
param evaluationFrequency string = 'PT5M'

@description('The time range the lag and poison-batch queries look at (ISO 8601, at least evaluationFrequency).')
param windowSize string = 'PT15M'

@description('The time range the failed-ticks query looks back over: long enough to hold failedTicksInARow ticks of the slowest poller\'s schedule (ISO 8601, at least evaluationFrequency).')
param failedTicksWindowSize string = 'PT1H'

@description('Severity of "ticks failing" (0 critical .. 4 verbose).')
@minValue(0)
@maxValue(4)
param failedTicksSeverity int = 1

@description('Severity of "lag above the threshold".')
@minValue(0)
@maxValue(4)
param lagSeverity int = 2

@description('Severity of "poller blocked on a poison batch".')
@minValue(0)
@maxValue(4)
param blockedSeverity int = 1

@description('Severity of "a replication slot keeps more WAL than the threshold" (its disk is the database server\'s: a full disk stops the server\'s writes).')
@minValue(0)
@maxValue(4)
param slotRetainedSeverity int = 1

@description('Severity of "a poller has unresolved dead letters" (rows it gave up on, never delivered: the poller is degraded).')
@minValue(0)
@maxValue(4)
param deadLettersSeverity int = 2

@description('The pollers the stopped rules expect a tick line from, each { name, periodSeconds }: its schedule period at most, 0 for a schedule naming days, months or days of the week (main.bicep\'s pollerPeriods).')
param pollerPeriods array

@description('Fire when a poller has written no tick line for this many of its schedule periods (and at least stoppedAfterMinSeconds).')
@minValue(2)
@maxValue(100)
param stoppedAfterPeriods int = 3

@description('The least silence the stopped rules fire on, in seconds: above the time a line takes to reach Application Insights plus evaluationFrequency.')
@minValue(300)
param stoppedAfterMinSeconds int = 900

@description('When the deployment ran (main.bicep\'s utcNow()): a poller\'s silence counts from its last tick line or from this, whichever is later.')
param deployedAt string

@description('Severity of "a poller wrote no tick line for N periods".')
@minValue(0)
@maxValue(4)
param stoppedSeverity int = 1

@description('Severity of "no poller of the app wrote a tick line for N periods" (nothing is delivered).')
@minValue(0)
@maxValue(4)
param appStoppedSeverity int = 0

param tags object = {}

var actionGroups = empty(actionGroupId) ? [] : [actionGroupId]

// The last N tick lines of each poller, newest first (row_number restarts at each poller); one
// row for each poller whose N latest ticks all failed or were blocked. Fewer than N ticks in the
// window never fire: widen failedTicksWindowSize for slow schedules.
var failedTicksQuery = replace('''
let n = N_IN_A_ROW;
traces
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), outcome = tostring(line.outcome)
| where isnotempty(poller)
| order by poller asc, timestamp desc
| extend nth = row_number(1, prev(poller) != poller)
| where nth <= n
| summarize ticks = count(), failed = countif(outcome in ("failed", "blocked")), timestamp = max(timestamp), last_error = take_anyif(tostring(line.error), nth == 1), last_batch_id = take_anyif(tostring(line.batch_id), nth == 1) by poller
| where ticks == n and failed == n
''', 'N_IN_A_ROW', string(failedTicksInARow))

// Each poller's latest tick that reports its lag. lag_seconds is the age of the oldest row not yet
// delivered (0 when nothing waits: a caught-up poller on a quiet table never fires however old
// its cursor is), the same definition as the status and dev.sh. The rule compares it with
// lagThresholdSeconds.
var lagQuery = '''
traces
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), lag_seconds = todouble(line.lag_seconds), rows_waiting = tolong(line.rows_waiting)
| where isnotempty(poller) and isnotnull(lag_seconds)
| summarize arg_max(timestamp, lag_seconds, rows_waiting) by poller
'''

// Every "poller blocked" line in the window (one per tick while a poller is blocked on a batch that
// failed {P}_MAX_ATTEMPTS times with {P}_ON_POISON=block), one row per poller and batch.
var blockedQuery = '''
traces
| where message has "blocked"
| extend line = parse_json(message)
| where tostring(line.msg) == "poller blocked"
| extend poller = tostring(line.poller), batch_id = tostring(line.batch_id), attempts = tolong(line.attempts)
| where isnotempty(poller)
| summarize lines = count(), attempts = max(attempts), timestamp = max(timestamp) by poller, batch_id
'''

// Each logical poller's latest tick that measured its replication slot: slot_retained_bytes is
// the WAL the slot keeps (pg_current_wal_lsn() - restart_lsn), which PostgreSQL cannot recycle
// until the poller's commits advance the slot. Only logical pollers' tick lines carry it. The
// rule compares it with slotRetainedThresholdBytes.
var slotRetainedQuery = '''
traces
| where message has "slot_retained_bytes"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), slot_retained_bytes = tolong(line.slot_retained_bytes)
| where isnotempty(poller) and isnotnull(slot_retained_bytes)
| summarize arg_max(timestamp, slot_retained_bytes) by poller
'''

// Each poller's latest "dead letters" line in the window. While a poller has unresolved dead
// letters (rows {P}_ON_POISON=quarantine gave up on: its status is degraded) the handler lists
// them at most every five minutes and logs the line with their count; the first listing after
// they are all replayed or discarded logs count 0. So the rule fires while the latest count is
// above 0, and resolves on the count 0 line or when the window holds no line at all.
var deadLettersQuery = '''
traces
| where message has "dead letters"
| extend line = parse_json(message)
| where tostring(line.msg) == "dead letters"
| extend poller = tostring(line.poller), dead_letters = tolong(line.count), oldest_age_seconds = todouble(line.oldest_age_seconds)
| where isnotempty(poller) and isnotnull(dead_letters)
| summarize arg_max(timestamp, dead_letters, oldest_age_seconds) by poller
'''

// The dead man's switch. A timer that stopped (the host has been seen to stop every timer of a
// Flex app after a deployment: azure-functions-host #11828) writes no line, so the rules above
// never fire. This query makes a row for every poller the deployment declares, whether or not a
// line of it is in the range (a query that returns no row never fires): the datatable of the
// expected pollers, right-outer-joined to each one's latest tick line. A poller is stopped when
// its silence, counted from its latest tick line or from the deployment (deployedAt) whichever is
// later, passes N of its schedule periods and at least stoppedAfterMinSeconds; no tick line at all
// since the deployment counts from the deployment. `stopped` (0 or 1) is the measure: the
// per-poller rule fires on its maximum split by poller, the app rule on its minimum over every
// row, above 0 only when every poller is stopped. The query looks back two days
// (overrideQueryTimeRange, the most Azure Monitor allows), so only pollers whose N periods fit in
// two days are expected (watchedPollers; not one whose schedule names days, period 0). Its result
// has no datetime column, so the service never bins these rows by a time (a stopped poller's
// latest tick is older than any bin).
var stoppedRange = 'P2D'
var stoppedRangeSeconds = 172800
var watchedPollers = filter(pollerPeriods, p => p.periodSeconds > 0 && max(stoppedAfterPeriods * p.periodSeconds, stoppedAfterMinSeconds) <= stoppedRangeSeconds)
var stoppedQuery = replace(replace(replace(replace('''
let expected = datatable(poller: string, period_seconds: long) [EXPECTED_POLLERS];
let n = N_PERIODS;
let min_seconds = MIN_SECONDS;
let deployed = datetime(DEPLOYED_AT);
traces
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller)
| where isnotempty(poller)
| summarize last_tick = max(timestamp) by poller
| join kind=rightouter expected on poller
| project poller = poller1, period_seconds, last_tick
| extend stopped_after_seconds = max_of(n * period_seconds, min_seconds)
| extend silent_seconds = tolong((now() - max_of(last_tick, deployed)) / 1s)
| extend stopped = iff(silent_seconds > stopped_after_seconds, 1, 0), last_tick = tostring(last_tick)
| project poller, stopped, silent_seconds, stopped_after_seconds, period_seconds, last_tick
''', 'EXPECTED_POLLERS', join(map(watchedPollers, p => '"${p.name}", ${p.periodSeconds}'), ', ')), 'N_PERIODS', string(stoppedAfterPeriods)), 'MIN_SECONDS', string(stoppedAfterMinSeconds)), 'DEPLOYED_AT', deployedAt)

resource failedTicks 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${name}-ticks-failing'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: '${name}: a poller failed ${failedTicksInARow} ticks in a row'
    description: 'The last ${failedTicksInARow} tick lines of the poller named in the alert have outcome failed or blocked. The error is in the latest tick line (last_error); pollerctl status POLLER shows the failures.'
    severity: failedTicksSeverity
    enabled: true
    scopes: [
      insightsId
    ]
    evaluationFrequency: evaluationFrequency
    windowSize: failedTicksWindowSize
    criteria: {
      allOf: [
        {
          query: failedTicksQuery
          timeAggregation: 'Count'
          dimensions: [
            {
              name: 'poller'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

resource lag 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${name}-lag'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: '${name}: a poller is more than ${lagThresholdSeconds} s behind'
    description: 'The latest tick of the poller named in the alert reports lag_seconds (the age of the oldest row waiting) above ${lagThresholdSeconds}: it is not keeping up (too small a batch size, a slow handler, or failing ticks).'
    severity: lagSeverity
    enabled: true
    scopes: [
      insightsId
    ]
    evaluationFrequency: evaluationFrequency
    windowSize: windowSize
    criteria: {
      allOf: [
        {
          query: lagQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'lag_seconds'
          dimensions: [
            {
              name: 'poller'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: lagThresholdSeconds
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

resource blocked 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${name}-poison-blocked'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: '${name}: a poller is blocked on a poison batch'
    description: 'The poller named in the alert is blocked on the batch named in the alert: it failed {P}_MAX_ATTEMPTS times and {P}_ON_POISON is block. Fix the handler or the row and redeploy, or skip the batch as the "unblock" field of the poller blocked line says.'
    severity: blockedSeverity
    enabled: true
    scopes: [
      insightsId
    ]
    evaluationFrequency: evaluationFrequency
    windowSize: windowSize
    criteria: {
      allOf: [
        {
          query: blockedQuery
          timeAggregation: 'Count'
          dimensions: [
            {
              name: 'poller'
              operator: 'Include'
              values: [
                '*'
              ]
            }
            {
              name: 'batch_id'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

resource slotRetained 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${name}-slot-retained-wal'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: '${name}: a replication slot keeps more than ${slotRetainedThresholdBytes} bytes of WAL'
    description: 'The latest tick of the logical poller named in the alert reports slot_retained_bytes above ${slotRetainedThresholdBytes}: its replication slot keeps that much WAL on the database server, whose disk it fills. The poller is behind or failing (pollerctl status POLLER), or its table is quiet while the database is busy (a write to the table lets the next tick advance the slot). A poller removed without pollerctl cdc disable leaves its slot behind: see docs/cdc.md.'
    severity: slotRetainedSeverity
    enabled: true
    scopes: [
      insightsId
    ]
    evaluationFrequency: evaluationFrequency
    windowSize: windowSize
    criteria: {
      allOf: [
        {
          query: slotRetainedQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'slot_retained_bytes'
          dimensions: [
            {
              name: 'poller'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: slotRetainedThresholdBytes
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

resource deadLetters 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${name}-dead-letters'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: '${name}: a poller has unresolved dead letters'
    description: 'The poller named in the alert quarantined rows ({P}_ON_POISON=quarantine) that are not delivered until someone replays or discards them; its status is degraded. pollerctl deadletter list POLLER lists them, pollerctl deadletter show POLLER BATCH_ID shows each row and its error; fix the cause, then pollerctl deadletter replay or discard each. See docs/pollerctl.md, poison batches and dead letters.'
    severity: deadLettersSeverity
    enabled: true
    scopes: [
      insightsId
    ]
    evaluationFrequency: evaluationFrequency
    windowSize: windowSize
    criteria: {
      allOf: [
        {
          query: deadLettersQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'dead_letters'
          dimensions: [
            {
              name: 'poller'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

// The two stopped rules: one query (stoppedQuery), two measures of its `stopped` column.
resource stopped 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${name}-poller-stopped'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: '${name}: a poller wrote no tick line for ${stoppedAfterPeriods} schedule periods'
    description: 'The poller named in the alert has written no tick line for ${stoppedAfterPeriods} of its schedule periods (at least ${stoppedAfterMinSeconds} s), or none since the deployment: its timer does not run (the host can stop an app\'s timers after a deployment: restart the app), the app is down, every invocation fails before the tick runs (a "tick failed" line says why), or the workspace reached its daily cap and takes no lines (the status page still tells). pollerctl status POLLER shows its last tick.'
    severity: stoppedSeverity
    enabled: true
    scopes: [
      insightsId
    ]
    evaluationFrequency: evaluationFrequency
    windowSize: evaluationFrequency
    overrideQueryTimeRange: stoppedRange
    criteria: {
      allOf: [
        {
          query: stoppedQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'stopped'
          dimensions: [
            {
              name: 'poller'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

resource appStopped 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${name}-all-pollers-stopped'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: '${name}: no poller wrote a tick line for ${stoppedAfterPeriods} schedule periods'
    description: 'Every poller of the app is stopped (see ${name}: a poller wrote no tick line): nothing is delivered. The app is down or its timers stopped (restart it: az functionapp restart), its last publish failed, or the workspace reached its daily cap. The status page tells which.'
    severity: appStoppedSeverity
    enabled: true
    scopes: [
      insightsId
    ]
    evaluationFrequency: evaluationFrequency
    windowSize: evaluationFrequency
    overrideQueryTimeRange: stoppedRange
    criteria: {
      allOf: [
        {
          query: stoppedQuery
          timeAggregation: 'Minimum'
          metricMeasureColumn: 'stopped'
          dimensions: []
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: actionGroups
    }
  }
}

output names array = [
  failedTicks.name
  lag.name
  blocked.name
  slotRetained.name
  deadLetters.name
  stopped.name
  appStopped.name
]

@description('The pollers the stopped rules watch: those whose stoppedAfterPeriods periods fit in the rules\' two days.')
output watched array = map(watchedPollers, p => p.name)
