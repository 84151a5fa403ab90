// An Azure Monitor workbook of the pollers, over hours to weeks: the time since each poller's last
// tick line, then per poller the lag, the rows delivered, the tick duration, the failed ticks, the
// dead letters and (logical pollers) the WAL their replication slots keep, charted from the
// handler's own log lines in Application Insights (the `traces` table, each line in `message`:
// see modules/alerts.bicep, whose queries read the same lines). It opens from the portal (the
// component's Workbooks, or the resource group) and from the status page's link
// (STATUS_WORKBOOK_URL).
param name string
param location string

@description('The Application Insights component (resource id) the workbook queries.')
param insightsId string

@description('The pollers the deployment declares, each { name, periodSeconds } (main.bicep\'s pollerPeriods): the last-tick table shows each one, a line of it in the range or not.')
param pollerPeriods array

param tags object = {}

// Each chart's query: the tick lines (or dead letters lines) of the chosen pollers in the chosen
// time range, binned by the workbook's grain. {TimeRange} and {Poller} are the workbook's
// parameters; {TimeRange:grain} its automatic bin for the range.
var lagQuery = '''
traces
| where timestamp {TimeRange}
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), lag_seconds = todouble(line.lag_seconds)
| where isnotempty(poller) and poller in ({Poller})
| summarize lag_seconds = max(lag_seconds) by poller, bin(timestamp, {TimeRange:grain})
'''

var rowsQuery = '''
traces
| where timestamp {TimeRange}
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), rows = tolong(line.rows)
| where isnotempty(poller) and poller in ({Poller})
| summarize rows = sum(rows) by poller, bin(timestamp, {TimeRange:grain})
'''

var durationQuery = '''
traces
| where timestamp {TimeRange}
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), duration_ms = todouble(line.duration_ms)
| where isnotempty(poller) and poller in ({Poller})
| summarize p95_duration_ms = percentile(duration_ms, 95) by poller, bin(timestamp, {TimeRange:grain})
'''

var failuresQuery = '''
traces
| where timestamp {TimeRange}
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), outcome = tostring(line.outcome)
| where isnotempty(poller) and poller in ({Poller})
| summarize failed_ticks = countif(outcome in ("failed", "blocked")) by poller, bin(timestamp, {TimeRange:grain})
'''

var deadLettersQuery = '''
traces
| where timestamp {TimeRange}
| where message has "dead letters"
| extend line = parse_json(message)
| where tostring(line.msg) == "dead letters"
| extend poller = tostring(line.poller), dead_letters = tolong(line.count)
| where isnotempty(poller) and poller in ({Poller})
| summarize dead_letters = max(dead_letters) by poller, bin(timestamp, {TimeRange:grain})
'''

var slotQuery = '''
traces
| where timestamp {TimeRange}
| where message has "slot_retained_bytes"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), slot_retained_bytes = tolong(line.slot_retained_bytes)
| where isnotempty(poller) and poller in ({Poller}) and isnotnull(slot_retained_bytes)
| summarize slot_retained_bytes = max(slot_retained_bytes) by poller, bin(timestamp, {TimeRange:grain})
'''

// Since each poller's last tick line: the pollers the deployment declares (a datatable, so that
// one with no line in the range has its row) and any other that logged one, full-outer-joined to
// each one's latest tick line; the time since it in seconds and in its schedule periods, the
// silent ones first. The stopped alert rules (modules/alerts.bicep) fire on the same silence.
var lastTickQuery = replace('''
let expected = datatable(poller: string, period_seconds: long) [EXPECTED_POLLERS];
traces
| where timestamp {TimeRange}
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller), outcome = tostring(line.outcome)
| where isnotempty(poller)
| summarize arg_max(timestamp, outcome) by poller
| join kind=fullouter expected on poller
| project poller = coalesce(poller, poller1), period_seconds, last_tick = timestamp, last_outcome = outcome
| extend since_last_tick_seconds = tolong((now() - last_tick) / 1s)
| extend periods_since_last_tick = iff(period_seconds > 0, round(todouble(since_last_tick_seconds) / period_seconds, 1), real(null))
| order by since_last_tick_seconds desc nulls first, poller asc
''', 'EXPECTED_POLLERS', join(map(pollerPeriods, p => '"${p.name}", ${p.periodSeconds}'), ', '))

// The pollers that logged a tick in the range: the Poller parameter's choices.
var pollersQuery = '''
traces
| where timestamp {TimeRange}
| where message has "tick"
| extend line = parse_json(message)
| where tostring(line.msg) == "tick"
| extend poller = tostring(line.poller)
| where isnotempty(poller)
| distinct poller
| order by poller asc
'''

var charts = [
  {
    name: 'lag'
    title: 'Lag: the age of the oldest row waiting (seconds, the highest in each interval)'
    query: lagQuery
  }
  {
    name: 'rows'
    title: 'Rows delivered'
    query: rowsQuery
  }
  {
    name: 'duration'
    title: 'Tick duration (ms, 95th percentile)'
    query: durationQuery
  }
  {
    name: 'failures'
    title: 'Failed or blocked ticks'
    query: failuresQuery
  }
  {
    name: 'dead-letters'
    title: 'Dead letters (rows given up on, not delivered)'
    query: deadLettersQuery
  }
  {
    name: 'slot'
    title: 'WAL kept by logical pollers\' replication slots (bytes)'
    query: slotQuery
  }
]

var workbook = {
  version: 'Notebook/1.0'
  items: concat([
    {
      type: 1
      name: 'title'
      content: {
        json: '## ${name}: the pollers over time\nFrom the handler\'s tick lines. The status page shows each poller now; the alert rules fire on the same lines.'
      }
    }
    {
      type: 9
      name: 'parameters'
      content: {
        version: 'KqlParameterItem/1.0'
        parameters: [
          {
            id: 'time-range'
            version: 'KqlParameterItem/1.0'
            name: 'TimeRange'
            label: 'Time range'
            type: 4
            isRequired: true
            value: {
              durationMs: 86400000
            }
            typeSettings: {
              selectableValues: [
                {
                  durationMs: 3600000
                }
                {
                  durationMs: 21600000
                }
                {
                  durationMs: 86400000
                }
                {
                  durationMs: 604800000
                }
                {
                  durationMs: 2592000000
                }
              ]
            }
          }
          {
            id: 'poller'
            version: 'KqlParameterItem/1.0'
            name: 'Poller'
            label: 'Pollers'
            type: 2
            isRequired: true
            multiSelect: true
            quote: '\''
            delimiter: ','
            query: pollersQuery
            queryType: 0
            resourceType: 'microsoft.insights/components'
            value: [
              'value::all'
            ]
            typeSettings: {
              additionalResourceOptions: [
                'value::all'
              ]
              showDefault: false
            }
            defaultValue: 'value::all'
          }
        ]
      }
    }
    {
      type: 3
      name: 'last-tick'
      content: {
        version: 'KqlItem/1.0'
        title: 'Since each poller\'s last tick line (seconds, and in its schedule periods; none in the range: empty)'
        query: lastTickQuery
        size: 0
        queryType: 0
        resourceType: 'microsoft.insights/components'
        visualization: 'table'
      }
    }
  ], map(charts, c => {
    type: 3
    name: c.name
    content: {
      version: 'KqlItem/1.0'
      title: c.title
      query: c.query
      size: 0
      queryType: 0
      resourceType: 'microsoft.insights/components'
      visualization: 'timechart'
    }
  }))
  fallbackResourceIds: [
    insightsId
  ]
}

resource book 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(resourceGroup().id, name, 'pollers-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: '${name}: pollers'
    category: 'workbook'
    sourceId: insightsId
    serializedData: string(workbook)
  }
}

output id string = book.id
