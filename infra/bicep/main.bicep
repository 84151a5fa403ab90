// pseudotrigger on Azure Functions Flex Consumption, identity-only: no key, no secret and no
// connection string with a secret anywhere. Deploy with scripts/deploy.sh (or azd up).
targetScope = 'resourceGroup'

@description('The function app name; also {app} in the state blobs state/{app}/{poller}.json.')
param appName string = 'pt-${uniqueString(resourceGroup().id)}'

@description('Region of every resource.')
param location string = resourceGroup().location

@description('Keep the pollers\' state in its own storage account (recommended); false puts the db-state container in the host account.')
param separateStateAccount bool = true

@description('The state container.')
param stateContainerName string = 'db-state'

@description('Flex Consumption scale-out limit. Timer functions are singletons, so extra instances stay idle; keep it small.')
@minValue(1)
param maximumInstanceCount int = 40

@allowed([2048, 4096])
param instanceMemoryMB int = 2048

@description('One entry per pollers/<name> folder: name, driver (sqlserver|postgres|sqlite), schedule (NCRONTAB), and for sqlserver server and database (the DSN then authenticates with the app\'s identity), or connection for another DSN (use a Key Vault reference, never a literal secret).')
param pollers array

param tags object = {}

// Alerts (modules/alerts.bicep): log search alert rules over the handler's JSON lines in
// Application Insights, split by poller.

@description('Create the alert rules: a poller failing failedTicksInARow ticks in a row, lagging more than lagThresholdSeconds, or blocked on a poison batch.')
param alertsEnabled bool = true

@description('Resource id of the action group the alert rules notify (/subscriptions/.../providers/Microsoft.Insights/actionGroups/NAME). Empty: the rules are created without actions and their alerts show only in Azure Monitor > Alerts.')
param actionGroupId string = ''

@description('Alert when the last N ticks of a poller all failed or were blocked.')
@minValue(1)
@maxValue(100)
param failedTicksInARow int = 3

@description('Alert when a poller\'s latest tick has rows waiting and lag_seconds above this.')
@minValue(1)
param lagThresholdSeconds int = 300

@description('How often the alert rules run their queries (ISO 8601).')
param alertEvaluationFrequency string = 'PT5M'

@description('The time range of the lag and poison-batch rules (ISO 8601, at least alertEvaluationFrequency).')
param alertWindowSize string = 'PT15M'

@description('The time range of the failed-ticks rule: it must hold failedTicksInARow ticks of the slowest poller (ISO 8601, at least alertEvaluationFrequency).')
param failedTicksWindowSize string = 'PT1H'

@description('Severity of the failed-ticks alert, 0 (critical) to 4 (verbose).')
@minValue(0)
@maxValue(4)
param failedTicksSeverity int = 1

@description('Severity of the lag alert, 0 (critical) to 4 (verbose).')
@minValue(0)
@maxValue(4)
param lagSeverity int = 2

@description('Severity of the poison-batch alert, 0 (critical) to 4 (verbose).')
@minValue(0)
@maxValue(4)
param blockedSeverity int = 1

var suffix = uniqueString(resourceGroup().id, appName)
var hostStorageName = 'st${suffix}'
var stateStorageName = separateStateAccount ? 'sts${suffix}' : hostStorageName
var deploymentContainerName = 'app-package'

module identity 'modules/identity.bicep' = {
  name: 'identity'
  params: {
    name: 'id-${appName}'
    location: location
    tags: tags
  }
}

module hostStorage 'modules/storage.bicep' = {
  name: 'host-storage'
  params: {
    name: hostStorageName
    location: location
    containers: separateStateAccount ? [deploymentContainerName] : [deploymentContainerName, stateContainerName]
    tags: tags
  }
}

module stateStorage 'modules/storage.bicep' = if (separateStateAccount) {
  name: 'state-storage'
  params: {
    name: stateStorageName
    location: location
    containers: [stateContainerName]
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    name: appName
    location: location
    tags: tags
  }
}

module alerts 'modules/alerts.bicep' = if (alertsEnabled) {
  name: 'alerts'
  params: {
    name: appName
    location: location
    insightsId: monitoring.outputs.id
    actionGroupId: actionGroupId
    failedTicksInARow: failedTicksInARow
    lagThresholdSeconds: lagThresholdSeconds
    evaluationFrequency: alertEvaluationFrequency
    windowSize: alertWindowSize
    failedTicksWindowSize: failedTicksWindowSize
    failedTicksSeverity: failedTicksSeverity
    lagSeverity: lagSeverity
    blockedSeverity: blockedSeverity
    tags: tags
  }
}

module roles 'modules/roles.bicep' = {
  name: 'roles'
  params: {
    principalId: identity.outputs.principalId
    hostStorageName: hostStorageName
    stateStorageName: stateStorageName
    stateContainerName: stateContainerName
    insightsName: monitoring.outputs.name
  }
  dependsOn: [
    hostStorage
    stateStorage
  ]
}

var stateBlobEndpoint = 'https://${stateStorageName}.blob.${environment().suffixes.storage}'

// The app settings the README documents, every storage and telemetry connection by identity.
var baseSettings = {
  AzureWebJobsStorage__accountName: hostStorageName
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identity.outputs.clientId
  StateStorage__blobServiceUri: stateBlobEndpoint
  StateStorage__credential: 'managedidentity'
  StateStorage__clientId: identity.outputs.clientId
  STATE_CONTAINER: stateContainerName
  POLLER_APP_NAME: appName
  // The connection string names the resource (its instrumentation key is an identifier, not a
  // credential: local authentication is disabled); the authentication string makes the SDK use
  // the identity.
  APPLICATIONINSIGHTS_CONNECTION_STRING: monitoring.outputs.connectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identity.outputs.clientId};Authorization=AAD'
}

// {P}_DB_DRIVER, {P}_DB_CONNECTION and {P}_SCHEDULE for every poller; SQL Server sources use
// Entra ID with the app's user-assigned identity (go-mssqldb's azuread driver).
var pollerSettings = reduce(pollers, {}, (acc, p) => union(acc, {
  '${toUpper(replace(p.name, '-', '_'))}_DB_DRIVER': p.driver
  '${toUpper(replace(p.name, '-', '_'))}_DB_CONNECTION': p.driver == 'sqlserver' && !contains(p, 'connection')
    ? 'sqlserver://${p.server}?database=${p.database}&fedauth=ActiveDirectoryManagedIdentity&user+id=${identity.outputs.clientId}'
    : p.connection
  '${toUpper(replace(p.name, '-', '_'))}_SCHEDULE': p.schedule
}))

module app 'modules/functionapp.bicep' = {
  name: 'function-app'
  params: {
    name: appName
    location: location
    identityId: identity.outputs.id
    deploymentContainerUrl: '${hostStorage.outputs.blobEndpoint}${deploymentContainerName}'
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    appSettings: union(baseSettings, pollerSettings)
    tags: tags
  }
  dependsOn: [
    roles
  ]
}

output appName string = app.outputs.name
output hostName string = app.outputs.hostName
output identityName string = 'id-${appName}'
output identityClientId string = identity.outputs.clientId
output stateAccount string = stateStorageName
output stateContainer string = stateContainerName
