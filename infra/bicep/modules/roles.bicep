// Least-privilege role assignments for the app's identity. Names are deterministic guid()s so a
// redeploy finds the same assignments.
param principalId string
param hostStorageName string
param stateStorageName string
param stateContainerName string
param insightsName string

@description('An operator (user, group or service principal object id) given Storage Blob Data Contributor on the state container, for pollerctl; empty: none.')
param operatorPrincipalId string = ''

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param operatorPrincipalType string = 'User'

@description('Storage Table Data Contributor on the host account for the app\'s identity, so the host can record its diagnostic events.')
param hostDiagnosticEvents bool

// Built-in role definition ids.
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageBlobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'
var storageTableDataContributor = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'

resource hostStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: hostStorageName
}

resource stateStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: stateStorageName
}

resource stateBlobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' existing = {
  parent: stateStorage
  name: 'default'
}

resource stateContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  parent: stateBlobService
  name: stateContainerName
}

resource insights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: insightsName
}

// The Functions host keeps its own state in blobs (timer schedule status, singleton locks,
// the deployment package): Storage Blob Data Owner on the host account is the documented minimum.
// No Queue role: nothing here uses queues (timer triggers only need blobs). The Table role below
// is optional: the host records its diagnostic events in a table when it may.
resource hostBlobOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, principalId, storageBlobDataOwner)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// The pollers' checkpoints and leases: read and conditional writes in the state container only.
resource stateBlobContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(stateContainer.id, principalId, storageBlobDataContributor)
  scope: stateContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// Telemetry to Application Insights with local authentication disabled.
resource insightsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(insights.id, principalId, monitoringMetricsPublisher)
  scope: insights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// Optional: the host's diagnostic events (AzureFunctionsDiagnosticEvents table), as Microsoft's
// Flex samples grant; off by default, nothing in pseudotrigger needs it.
resource hostTableContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (hostDiagnosticEvents) {
  name: guid(hostStorage.id, principalId, storageTableDataContributor)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// Optional: an operator's pollerctl (status, resets, dead letters) against the state container
// only, as deploy.sh's next steps would grant by hand.
resource operatorStateContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(operatorPrincipalId)) {
  name: guid(stateContainer.id, operatorPrincipalId, storageBlobDataContributor)
  scope: stateContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}
