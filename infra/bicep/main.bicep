// pseudotrigger on Azure Functions Flex Consumption, identity-only: no key, no secret and no
// connection string with a secret anywhere. Deploy with scripts/deploy.sh (or azd up).
targetScope = 'resourceGroup'

@description('The function app\'s name: a global DNS name (<appName>.azurewebsites.net), so the default is unique to the resource group. It also names the storage accounts and is POLLER_APP_NAME, {app} in the state blobs state/{app}/{poller}.json: never change it after the first deploy, or every poller starts again from an empty checkpoint in a new account.')
param appName string = 'pt-${uniqueString(resourceGroup().id)}'

@description('Region of every resource.')
param location string = resourceGroup().location

@description('Keep the pollers\' state in its own storage account (recommended); false puts the db-state container in the host account.')
param separateStateAccount bool = true

@description('The state container.')
param stateContainerName string = 'db-state'

@description('Flex Consumption scale-out limit, 40 (the lowest Flex allows) to 1000. Flex gives each timer function instances of its own, so the app gets at least one per poller plus one for the status function whatever this says; timers are singletons, so more stay idle.')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Memory of each instance in MB; the Go handler fits in the smallest.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 512

@description('One entry per pollers/<name> folder: name, driver (sqlserver|postgres|sqlite), schedule (NCRONTAB), and for sqlserver server and database (the DSN then authenticates with the app\'s identity), or connection for another DSN (use a Key Vault reference, never a literal secret); optionally settings, the poller\'s other settings without the {P}_ prefix, e.g. { ON_POISON: \'quarantine\', MAX_LAG: \'10m\' }.')
param pollers array

@description('One entry per sink connection of the declared pollers (<name>/poller.json): connection (the sink\'s connection, an app setting name prefix X), type and the existing target: storagequeue with storageAccountName and queueName; servicebus with namespaceName and queueName or topicName; eventhubs with namespaceName and hubName; eventgrid with topicName; optionally resourceGroupName, for a target in another resource group of the subscription. Each entry sets X__queueServiceUri, X__fullyQualifiedNamespace or X__topicEndpointUri, with X__credential and X__clientId (the app\'s identity), and gives the identity the type\'s sender role on that queue, topic or hub only; with vnetEnabled, privateEndpoint: true also gives the target a private endpoint in the app\'s network (a Service Bus namespace must be Premium). The targets are never created: create them first.')
param sinks array = []

@description('Extra app settings by full name, e.g. a handler\'s own { ORDERS_WEBHOOK_URL: \'https://...\' }. The deployment owns every app setting: one set only in the portal is removed at the next deploy.')
param appSettings object = {}

@description('An operator\'s object id (az ad signed-in-user show --query id -o tsv) to give Storage Blob Data Contributor on the state container, for pollerctl; empty: none. If that role was already granted by hand, remove that assignment first (Azure refuses a second one).')
param operatorPrincipalId string = ''

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param operatorPrincipalType string = 'User'

@description('Give the app\'s identity Storage Table Data Contributor on the host account, so the host records its diagnostic events (as Microsoft\'s Flex samples do, and as the host expects: without the role it logs that it cannot); false: no role, and the host\'s diagnostic event logging is turned off (AzureWebJobsFeatureFlags DisableDiagnosticEventLogging), so that its logs carry no permission error. Nothing in pseudotrigger needs it.')
param hostDiagnosticEvents bool = true

@description('Zone redundancy (Flex Consumption, in the regions az functionapp list-flexconsumption-locations --zone-redundant=true lists): instances spread over availability zones, and the storage accounts zone-redundant (Standard_ZRS), as Microsoft requires of the host account. The platform then keeps at least two always-ready instances of each function group (each poller\'s timer is one), billed as always ready.')
param zoneRedundant bool = false

// Private networking (modules/network.bicep, docs/networking.md).

@description('Private networking: the app\'s outbound traffic through a subnet of a virtual network (to reach a database behind a private endpoint or in a virtual network), and the storage accounts reachable only through private endpoints, their public network access off. pollerctl then reaches the state account from the network, or through a firewall rule for the operator\'s address (docs/networking.md).')
param vnetEnabled bool = false

@description('vnetEnabled: the address space of the virtual network made here.')
param vnetAddressPrefix string = '10.0.0.0/16'

@description('vnetEnabled: the app\'s subnet in it, delegated to Microsoft.App/environments.')
param appSubnetPrefix string = '10.0.2.0/24'

@description('vnetEnabled: the private endpoints\' subnet in it.')
param privateEndpointSubnetPrefix string = '10.0.1.0/24'

@description('vnetEnabled: an existing subnet for the app instead (delegated to Microsoft.App/environments), in a network that reaches the database, e.g. peered with its network; empty: a network is made here.')
param existingAppSubnetId string = ''

@description('vnetEnabled with existingAppSubnetId: the existing subnet, in the same network, for the private endpoints.')
param existingPrivateEndpointSubnetId string = ''

// Data protection of the account holding the state container (modules/storage.bicep).

@description('Days a deleted state blob or container can be restored (soft delete).')
@minValue(1)
@maxValue(365)
param stateSoftDeleteDays int = 7

@description('Days each previous version of a state blob is kept (versioning; a lifecycle rule deletes older versions).')
@minValue(1)
param stateVersionRetentionDays int = 7

@description('A CanNotDelete lock on the account holding the state container. Deleting the resource group then needs az lock delete first.')
param stateLock bool = true

@description('Log Analytics daily ingestion cap in GB (-1: none).')
@minValue(-1)
param logDailyCapGb int = 1

param tags object = {}

// Alerts (modules/alerts.bicep): log search alert rules over the handler's JSON lines in
// Application Insights, split by poller.

@description('Create the alert rules: a poller failing failedTicksInARow ticks in a row, lagging more than lagThresholdSeconds, blocked on a poison batch, with unresolved dead letters (degraded), (logical pollers) its replication slot keeping more than slotRetainedThresholdBytes of WAL, or stopped (no tick line for stoppedAfterPeriods periods), and all pollers stopped.')
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

@description('Alert when a logical poller\'s latest tick reports its replication slot keeping more WAL than this (bytes; keep it at or below {P}_CDC_MAX_RETAINED, default 1 GiB).')
@minValue(1)
param slotRetainedThresholdBytes int = 1073741824

@description('How often the alert rules run their queries (ISO 8601).')
param alertEvaluationFrequency string = 'PT5M'

@description('The time range of the lag, poison-batch and dead-letters rules (ISO 8601, at least alertEvaluationFrequency).')
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

@description('Severity of the dead-letters alert (a poller with unresolved dead letters: degraded), 0 (critical) to 4 (verbose).')
@minValue(0)
@maxValue(4)
param deadLettersSeverity int = 2

@description('The dead man\'s switch: alert when a poller has written no tick line for this many of its schedule periods (and at least stoppedAfterMinSeconds), and once for the app when none of its pollers has. A stopped timer writes no line, so no other rule fires.')
@minValue(2)
@maxValue(100)
param stoppedAfterPeriods int = 3

@description('The least silence the stopped rules alert on, in seconds, whatever the schedule: above the time a tick line takes to reach Application Insights (minutes) plus alertEvaluationFrequency, so that a late line is not a stopped poller.')
@minValue(300)
param stoppedAfterMinSeconds int = 900

@description('Severity of the poller-stopped alert, 0 (critical) to 4 (verbose).')
@minValue(0)
@maxValue(4)
param stoppedSeverity int = 1

@description('Severity of the all-pollers-stopped alert (nothing is delivered), 0 (critical) to 4 (verbose).')
@minValue(0)
@maxValue(4)
param appStoppedSeverity int = 0

@description('When this deployment ran (leave it to its default): the stopped rules count a poller\'s silence from its last tick line or from this, whichever is later, so that a poller just added (or timers not yet restarted by this deployment) is given its periods before it is called stopped.')
param deployedAt string = utcNow('o')

var suffix = uniqueString(resourceGroup().id, appName)

// Each poller's schedule period in seconds, at most: how long it may go between two ticks while
// its timer runs (the stopped rules' and the workbook's unit). NCRONTAB's six fields are second,
// minute, hour, day, month and day of week. Of the second, minute and hour fields, the most
// significant one that is not * fires every k of its units for */k (or 0/k), and at least once
// per unit of the field above it for any other value (a number, a list, a range), while every
// field above it is *: so the longest gap is k of its units, or the whole unit above. A schedule
// that names days, months or days of the week has no period here (0): its gaps run to days or
// years, longer than any stopped rule can look back. Exact for the usual */k and single-value
// forms, never below the real period: infra/bicep/alerts_test.go checks the rule against the
// handler's own (SchedulePeriod).
var scheduleFields = [for p in pollers: concat(filter(split(trim(p.schedule), ' '), f => !empty(f)), ['*', '*', '*', '*', '*', '*'])]
var restrictedField = [for f in scheduleFields: lastIndexOf(map(take(f, 3), x => x != '*'), true)]
var fieldSeconds = [1, 60, 3600]
var fieldWhole = [60, 60, 24]
var pollerPeriods = [for (p, i) in pollers: {
  name: p.name
  periodSeconds: length(filter(skip(take(scheduleFields[i], 6), 3), x => x != '*')) > 0 ? 0 : restrictedField[i] < 0 ? 1 : fieldSeconds[restrictedField[i]] * (startsWith(scheduleFields[i][restrictedField[i]], '*/') || startsWith(scheduleFields[i][restrictedField[i]], '0/') ? int(substring(scheduleFields[i][restrictedField[i]], 2)) : fieldWhole[restrictedField[i]])
}]

// vnetEnabled: the private DNS zone of each service reached through a private endpoint (the host
// account's blob and queue, its table with hostDiagnosticEvents, the state account's blob, and
// the sinks marked privateEndpoint), each made and linked to the network once.
var sinkZones = {
  storagequeue: 'privatelink.queue.${environment().suffixes.storage}'
  servicebus: 'privatelink.servicebus.windows.net'
  eventhubs: 'privatelink.servicebus.windows.net'
  eventgrid: 'privatelink.eventgrid.azure.net'
}
var privateSinks = vnetEnabled ? filter(sinks, s => s.?privateEndpoint ?? false) : []
var storageZones = union([
  'privatelink.blob.${environment().suffixes.storage}'
  'privatelink.queue.${environment().suffixes.storage}'
], hostDiagnosticEvents ? ['privatelink.table.${environment().suffixes.storage}'] : [])
var zoneNames = union(storageZones, map(privateSinks, s => sinkZones[s.type]))
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

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    name: appName
    location: location
    dailyCapGb: logDailyCapGb
    tags: tags
  }
}

// The account holding the state container gets soft delete, versioning, the lock and its write
// logs: the host account too when separateStateAccount is false.
module hostStorage 'modules/storage.bicep' = {
  name: 'host-storage'
  params: {
    name: hostStorageName
    location: location
    publicNetworkAccess: !vnetEnabled
    zoneRedundant: zoneRedundant
    containers: separateStateAccount ? [deploymentContainerName] : [deploymentContainerName, stateContainerName]
    dataProtection: !separateStateAccount
    softDeleteDays: stateSoftDeleteDays
    versionRetentionDays: stateVersionRetentionDays
    protectedContainer: stateContainerName
    deleteLock: !separateStateAccount && stateLock
    workspaceId: separateStateAccount ? '' : monitoring.outputs.workspaceId
    tags: tags
  }
}

module stateStorage 'modules/storage.bicep' = if (separateStateAccount) {
  name: 'state-storage'
  params: {
    name: stateStorageName
    location: location
    publicNetworkAccess: !vnetEnabled
    zoneRedundant: zoneRedundant
    containers: [stateContainerName]
    dataProtection: true
    softDeleteDays: stateSoftDeleteDays
    versionRetentionDays: stateVersionRetentionDays
    protectedContainer: stateContainerName
    deleteLock: stateLock
    workspaceId: monitoring.outputs.workspaceId
    tags: tags
  }
}

module network 'modules/network.bicep' = if (vnetEnabled) {
  name: 'network'
  params: {
    name: appName
    location: location
    addressPrefix: vnetAddressPrefix
    appSubnetPrefix: appSubnetPrefix
    privateEndpointSubnetPrefix: privateEndpointSubnetPrefix
    existingAppSubnetId: existingAppSubnetId
    existingPrivateEndpointSubnetId: existingPrivateEndpointSubnetId
    zoneNames: zoneNames
    tags: tags
  }
}

// The storage accounts' private endpoints: the host account's blob and queue (the host's
// package, locks and timers) and table (hostDiagnosticEvents), the state account's blob.
var storageEndpoints = union([
  {
    account: hostStorageName
    groupId: 'blob'
  }
  {
    account: hostStorageName
    groupId: 'queue'
  }
], hostDiagnosticEvents ? [
  {
    account: hostStorageName
    groupId: 'table'
  }
] : [], separateStateAccount ? [
  {
    account: stateStorageName
    groupId: 'blob'
  }
] : [])

module storageEndpoint 'modules/privateendpoint.bicep' = [for e in (vnetEnabled ? storageEndpoints : []): {
  name: 'pe-${e.account}-${e.groupId}'
  params: {
    name: 'pe-${e.account}-${e.groupId}'
    location: location
    subnetId: network!.outputs.privateEndpointSubnetId
    targetId: resourceId('Microsoft.Storage/storageAccounts', e.account)
    groupId: e.groupId
    zoneId: resourceId('Microsoft.Network/privateDnsZones', 'privatelink.${e.groupId}.${environment().suffixes.storage}')
    tags: tags
  }
  dependsOn: [
    hostStorage
    stateStorage
  ]
}]

// A sink marked privateEndpoint: its account's queue service, its namespace (Service Bus, whose
// private endpoints need the Premium tier; Event Hubs) or its Event Grid topic, in this network.
module sinkEndpoint 'modules/privateendpoint.bicep' = [for s in privateSinks: {
  name: take('pe-${appName}-sink-${s.connection}', 64)
  params: {
    name: take('pe-${appName}-sink-${s.connection}', 80)
    location: location
    subnetId: network!.outputs.privateEndpointSubnetId
    targetId: {
      storagequeue: resourceId(s.?resourceGroupName ?? resourceGroup().name, 'Microsoft.Storage/storageAccounts', s.?storageAccountName ?? 'none')
      servicebus: resourceId(s.?resourceGroupName ?? resourceGroup().name, 'Microsoft.ServiceBus/namespaces', s.?namespaceName ?? 'none')
      eventhubs: resourceId(s.?resourceGroupName ?? resourceGroup().name, 'Microsoft.EventHub/namespaces', s.?namespaceName ?? 'none')
      eventgrid: resourceId(s.?resourceGroupName ?? resourceGroup().name, 'Microsoft.EventGrid/topics', s.?topicName ?? 'none')
    }[s.type]
    groupId: {
      storagequeue: 'queue'
      servicebus: 'namespace'
      eventhubs: 'namespace'
      eventgrid: 'topic'
    }[s.type]
    zoneId: resourceId('Microsoft.Network/privateDnsZones', sinkZones[s.type])
    tags: tags
  }
}]

// The pollers over hours to weeks, from the same lines as the alerts; the status page links to it.
module workbook 'modules/workbook.bicep' = {
  name: 'workbook'
  params: {
    name: appName
    location: location
    insightsId: monitoring.outputs.id
    pollerPeriods: pollerPeriods
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
    slotRetainedThresholdBytes: slotRetainedThresholdBytes
    evaluationFrequency: alertEvaluationFrequency
    windowSize: alertWindowSize
    failedTicksWindowSize: failedTicksWindowSize
    failedTicksSeverity: failedTicksSeverity
    lagSeverity: lagSeverity
    blockedSeverity: blockedSeverity
    deadLettersSeverity: deadLettersSeverity
    pollerPeriods: pollerPeriods
    stoppedAfterPeriods: stoppedAfterPeriods
    stoppedAfterMinSeconds: stoppedAfterMinSeconds
    stoppedSeverity: stoppedSeverity
    appStoppedSeverity: appStoppedSeverity
    deployedAt: deployedAt
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
    operatorPrincipalId: operatorPrincipalId
    operatorPrincipalType: operatorPrincipalType
    hostDiagnosticEvents: hostDiagnosticEvents
  }
  dependsOn: [
    hostStorage
    stateStorage
  ]
}

// Each sink's role on its target, in the target's resource group, and its app settings.
module sinkAccess 'modules/sink.bicep' = [for s in sinks: {
  name: take('${appName}-sink-${s.connection}', 64)
  scope: resourceGroup(s.?resourceGroupName ?? resourceGroup().name)
  params: {
    sink: s
    principalId: identity.outputs.principalId
    clientId: identity.outputs.clientId
  }
}]

var stateBlobEndpoint = 'https://${stateStorageName}.blob.${environment().suffixes.storage}'

// The app settings docs/contract.md documents, every storage and telemetry connection by identity.
var baseSettings = union({
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
  // The status page's link to the workbook, in this cloud's portal.
  STATUS_WORKBOOK_URL: '${environment().portal}/#resource${workbook.outputs.id}'
}, hostDiagnosticEvents ? {} : {
  // Without its table role the host would log, at each start, that it cannot record its
  // diagnostic events: turned off instead (the host's ScriptConstants.FeatureFlagDisableDiagnosticEventLogging),
  // beside any flag appSettings gives.
  AzureWebJobsFeatureFlags: join(filter(concat(split(appSettings.?AzureWebJobsFeatureFlags ?? '', ','), ['DisableDiagnosticEventLogging']), f => !empty(f)), ',')
})

module app 'modules/functionapp.bicep' = {
  name: 'function-app'
  params: {
    name: appName
    location: location
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    deploymentContainerUrl: '${hostStorage.outputs.blobEndpoint}${deploymentContainerName}'
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    baseSettings: baseSettings
    appSettings: appSettings
    pollers: pollers
    sinkSettings: [for i in range(0, length(sinks)): sinkAccess[i].outputs.settings]
    subnetId: vnetEnabled ? network!.outputs.appSubnetId : ''
    zoneRedundant: zoneRedundant
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
output identityPrincipalId string = identity.outputs.principalId
output stateAccount string = stateStorageName
output stateContainer string = stateContainerName
output workbookId string = workbook.outputs.id
