// An example: one entry per pollers/<name> folder (CI checks that every poller has one).
using 'main.bicep'

param appName = 'pseudotrigger-demo'

param pollers = [
  {
    name: 'orders'
    driver: 'sqlserver'
    server: 'contoso-sql.database.windows.net'
    database: 'shop'
    schedule: '*/30 * * * * *'
  }
]

// Alerts: an existing action group's resource id, e.g.
// '/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Insights/actionGroups/<name>'.
// Empty: the rules are still created and fire into Azure Monitor > Alerts, notifying no one.
param actionGroupId = ''
param failedTicksInARow = 3
param lagThresholdSeconds = 300
