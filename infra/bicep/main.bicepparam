// An example: one pollers entry per pollers/<name> folder and per declared poller <name>/poller.json,
// and one sinks entry per sink connection of the declared pollers (CI checks both).
using 'main.bicep'

// appName is left to its default, pt-<unique to the resource group>: the app's name is a global
// DNS name, and it names the storage accounts and the state blobs (POLLER_APP_NAME). To choose
// one, set it before the first deploy and never change it afterwards:
// param appName = 'pt-orders-prod'

param pollers = [
  {
    name: 'orders'
    driver: 'sqlserver'
    server: 'contoso-sql.database.windows.net'
    database: 'shop'
    schedule: '*/30 * * * * *'
    // The poller's other settings, without the ORDERS_ prefix (README, Poller settings). The
    // deployment owns the app settings: set them here, not in the portal.
    settings: {
      ON_POISON: 'block'
    }
  }
  {
    // The declared poller orders-queue/poller.json: the same orders table, each changed row sent
    // to the storage queue of its sink (the sinks entry below).
    name: 'orders-queue'
    driver: 'sqlserver'
    server: 'contoso-sql.database.windows.net'
    database: 'shop'
    schedule: '*/30 * * * * *'
  }
]

// The sinks of the declared pollers, by their connection name: the app's identity gets the sender
// role on that queue only, and the app the settings ChangesQueue__queueServiceUri,
// ChangesQueue__credential and ChangesQueue__clientId. The account and the queue must exist
// (az storage queue create --account-name ... --name orders-changes --auth-mode login);
// resourceGroupName: '...' for an account in another resource group.
param sinks = [
  {
    connection: 'ChangesQueue'
    type: 'storagequeue'
    storageAccountName: 'contosochanges'
    queueName: 'orders-changes'
  }
]

// Extra app settings by full name, e.g. the example handler's own:
// param appSettings = { ORDERS_WEBHOOK_URL: 'https://example.net/hooks/orders' }

// pollerctl from your machine: your object id (az ad signed-in-user show --query id -o tsv) gets
// Storage Blob Data Contributor on the state container.
// param operatorPrincipalId = '00000000-0000-0000-0000-000000000000'

// Alerts: an existing action group's resource id, e.g.
// '/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Insights/actionGroups/<name>'.
// Empty: the rules are still created and fire into Azure Monitor > Alerts, notifying no one.
param actionGroupId = ''
param failedTicksInARow = 3
param lagThresholdSeconds = 300
