// Least-privilege role assignments for the app's identity. Names are deterministic guid()s so a
// redeploy finds the same assignments.
param principalId string
param hostStorageName string
param stateStorageName string
param stateContainerName string
param insightsName string

// Built-in role definition ids.
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageBlobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

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
// No Queue or Table role: nothing here uses queues or tables (timer triggers only need blobs).
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
