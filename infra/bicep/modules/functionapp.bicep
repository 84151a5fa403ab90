// The function app: Flex Consumption (FC1, Linux), custom handler runtime, deployment package
// read with the user-assigned identity, HTTPS only, Key Vault references resolved with that
// identity, and every app setting the deployment owns.
//
// No siteConfig.ftpsState: Flex Consumption has no FTP, and Azure rejects the property on Flex
// sites (error 51021) where that check is rolled out. No FUNCTIONS_WORKER_RUNTIME either: on Flex
// the runtime is functionAppConfig.runtime.
param name string
param location string
param identityId string

@description('The user-assigned identity\'s client id: SQL Server sources sign in with it.')
param identityClientId string

param deploymentContainerUrl string

@description('Flex Consumption scale-out limit (40 to 1000). Flex gives each timer function instances of its own, so the app gets at least one per poller plus one for the status function.')
param maximumInstanceCount int

param instanceMemoryMB int

@description('The settings the app itself needs (storage, state, telemetry): they win over any other setting of the same name.')
param baseSettings object

@description('Extra app settings, e.g. a handler\'s own ORDERS_WEBHOOK_URL.')
param appSettings object = {}

@description('main.bicep\'s pollers array.')
param pollers array

@description('The sinks\' identity-based connection settings, one object per main.bicep sinks entry (modules/sink.bicep\'s output).')
param sinkSettings array = []

param tags object = {}

@description('The subnet (delegated to Microsoft.App/environments) the app\'s outbound traffic goes through: main.bicep\'s vnetEnabled; empty: none.')
param subnetId string = ''

@description('Spread the instances over availability zones (the plan\'s zoneRedundant).')
param zoneRedundant bool = false

// The settings each pollers entry makes, where {P} is its name in upper case with - as _
// (poller.Prefix in Go): its optional settings object, {P}_ prefixed (e.g.
// ON_POISON: 'quarantine' is {P}_ON_POISON), then {P}_DB_DRIVER, {P}_DB_CONNECTION and
// {P}_SCHEDULE, which win. SQL Server sources sign in with Entra ID as the app's identity
// (go-mssqldb's azuread driver) unless the entry gives a connection. (A ternary, which ARM
// evaluates lazily: p.server may be absent when a connection is given. Not contains() ? :, which
// the use-safe-access lint rule flags.)
var sqlServerDsn = 'fedauth=ActiveDirectoryManagedIdentity&user+id=${identityClientId}'
var pollerSettings = reduce(pollers, {}, (acc, p) => union(acc, toObject(items(p.?settings ?? {}), s => '${toUpper(replace(p.name, '-', '_'))}_${s.key}', s => string(s.value)), {
  '${toUpper(replace(p.name, '-', '_'))}_DB_DRIVER': p.driver
  '${toUpper(replace(p.name, '-', '_'))}_DB_CONNECTION': !contains(p, 'connection') ? 'sqlserver://${p.server}?database=${p.database}&${sqlServerDsn}' : p.connection
  '${toUpper(replace(p.name, '-', '_'))}_SCHEDULE': p.schedule
}))

// Later objects win: the app's extra settings, the pollers', the sinks' connections, then the
// app's own.
var sinkConnections = reduce(sinkSettings, {}, (acc, s) => union(acc, s))
var settings = union(toObject(items(appSettings), s => s.key, s => string(s.value)), pollerSettings, sinkConnections, baseSettings)

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: 'plan-${name}'
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
    zoneRedundant: zoneRedundant
  }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    // App settings of the form @Microsoft.KeyVault(...) resolve with the user-assigned identity
    // (without this, App Service tries a system-assigned identity the app does not have, and the
    // setting stays the literal reference). The identity needs Key Vault Secrets User on the vault.
    keyVaultReferenceIdentity: identityId
    // Virtual network integration (Flex Consumption): the app's outbound traffic, to the
    // database, the storage accounts and the sinks, goes through the subnet.
    virtualNetworkSubnetId: empty(subnetId) ? null : subnetId
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: max(maximumInstanceCount, length(pollers) + 1)
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'custom'
        version: '1.0'
      }
    }
  }
}

// The deployment owns every app setting: this replaces them all, so a setting changed in the
// portal returns to the template's value at the next deploy. Change settings here (main.bicep's
// pollers[].settings and appSettings), not in the portal.
resource appSettingsConfig 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: app
  name: 'appsettings'
  properties: settings
}

output name string = app.name
output hostName string = app.properties.defaultHostName
