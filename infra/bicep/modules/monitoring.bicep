// Application Insights on a Log Analytics workspace, with local (key) authentication disabled:
// telemetry is accepted only from identities holding Monitoring Metrics Publisher.
param name string
param location string
param tags object = {}

@description('Log Analytics daily ingestion cap in GB; -1: no cap. When it is reached, ingestion stops until the next day (the alert rules then see nothing).')
@minValue(-1)
param dailyCapGb int = 1

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: 'log-${name}'
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: 30
    workspaceCapping: {
      dailyQuotaGb: dailyCapGb
    }
  }
}

resource insights 'Microsoft.Insights/components@2020-02-02' = {
  name: 'appi-${name}'
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

output id string = insights.id
output name string = insights.name
output connectionString string = insights.properties.ConnectionString
output workspaceId string = workspace.id
