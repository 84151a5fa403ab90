// A storage account reachable only with Entra ID (no shared keys, no public blobs, TLS 1.2,
// HTTPS only) and the blob containers it holds. The account that holds the pollers' state gets
// data protection: the checkpoint blob is the truth, so a bad reset, an overwritten or deleted
// blob and a deleted container must be recoverable.
param name string
param location string
param containers array
param tags object = {}

@description('Soft delete of blobs and containers, blob versioning with old versions trimmed, and the lock below: for the account holding the state container.')
param dataProtection bool = false

@description('Days a deleted blob or container can be restored (soft delete).')
@minValue(1)
@maxValue(365)
param softDeleteDays int = 7

@description('Days a previous version of a blob is kept before the lifecycle rule deletes it (every state write makes one).')
@minValue(1)
param versionRetentionDays int = 7

@description('The container whose old blob versions the lifecycle rule trims.')
param protectedContainer string = ''

@description('A CanNotDelete lock on the account (Azure Resource Manager deletes only: it does not stop data-plane writes).')
param deleteLock bool = false

@description('Log Analytics workspace (resource id) that receives the blob service\'s write and delete logs; empty: none.')
param workspaceId string = ''

@description('Reachable from the internet (with Entra ID); false: only through its private endpoints (main.bicep\'s vnetEnabled), every public request refused.')
param publicNetworkAccess bool = true

@description('Zone-redundant storage (Standard_ZRS), for a zone-redundant app; else locally redundant.')
param zoneRedundant bool = false

var protection = {
  deleteRetentionPolicy: {
    enabled: true
    days: softDeleteDays
  }
  containerDeleteRetentionPolicy: {
    enabled: true
    days: softDeleteDays
  }
  isVersioningEnabled: true
}

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: zoneRedundant ? 'Standard_ZRS' : 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    defaultToOAuthAuthentication: true
    publicNetworkAccess: publicNetworkAccess ? 'Enabled' : 'Disabled'
    networkAcls: publicNetworkAccess ? {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    } : {
      defaultAction: 'Deny'
      bypass: 'None'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
  properties: dataProtection ? protection : {}
}

resource blobContainers 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = [for c in containers: {
  parent: blobService
  name: c
  properties: {
    publicAccess: 'None'
  }
}]

// Versioning keeps every overwritten state document; a poller on a 10 s schedule that commits
// every tick makes thousands of versions a day. Lifecycle management (run once a day) deletes
// the versions older than versionRetentionDays; current blobs are never touched.
resource versionTrim 'Microsoft.Storage/storageAccounts/managementPolicies@2023-05-01' = if (dataProtection) {
  parent: account
  name: 'default'
  properties: {
    policy: {
      rules: [
        {
          name: 'trim-old-versions'
          enabled: true
          type: 'Lifecycle'
          definition: {
            filters: {
              blobTypes: [
                'blockBlob'
              ]
              prefixMatch: [
                '${protectedContainer}/'
              ]
            }
            actions: {
              version: {
                delete: {
                  daysAfterCreationGreaterThan: versionRetentionDays
                }
              }
            }
          }
        }
      ]
    }
  }
  dependsOn: [
    blobService
  ]
}

resource lock 'Microsoft.Authorization/locks@2020-05-01' = if (deleteLock) {
  name: 'keep-${name}'
  scope: account
  properties: {
    level: 'CanNotDelete'
    notes: 'Holds the pollers\' checkpoints. Remove this lock (az lock delete) before deleting the account or its resource group.'
  }
}

// Who moved a checkpoint: every write and delete on the account's blobs, with the caller's
// identity, in the Log Analytics workspace (StorageBlobLogs).
resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = if (!empty(workspaceId)) {
  name: 'blob-writes'
  scope: blobService
  properties: {
    workspaceId: workspaceId
    logs: [
      {
        category: 'StorageWrite'
        enabled: true
      }
      {
        category: 'StorageDelete'
        enabled: true
      }
    ]
  }
}

output id string = account.id
output name string = account.name
output blobEndpoint string = account.properties.primaryEndpoints.blob
