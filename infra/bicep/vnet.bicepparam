// The example of main.bicepparam with private networking (docs/networking.md): the app's outbound
// traffic through a subnet of a virtual network made here, the storage accounts and the sink's
// queue reachable only through private endpoints in it. The workflow builds it beside
// main.bicepparam. Deploy it as main.bicepparam is: scripts/deploy.sh -g GROUP -p infra/bicep/vnet.bicepparam.
using 'main.bicep'

param pollers = [
  {
    // An Azure SQL database with a private endpoint in this network (docs/networking.md), or
    // public access off and reached through it.
    name: 'orders-queue'
    driver: 'sqlserver'
    server: 'contoso-sql.database.windows.net'
    database: 'shop'
    schedule: '*/30 * * * * *'
  }
]

param sinks = [
  {
    connection: 'ChangesQueue'
    type: 'storagequeue'
    storageAccountName: 'contosochanges'
    queueName: 'orders-changes'
    // A private endpoint of the account's queue service in this network.
    privateEndpoint: true
  }
]

param vnetEnabled = true

// The network made here (the defaults); or an existing one, peered with the database's network:
// param existingAppSubnetId = '/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<app subnet>'
// param existingPrivateEndpointSubnetId = '/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<endpoints subnet>'
param vnetAddressPrefix = '10.0.0.0/16'
param appSubnetPrefix = '10.0.2.0/24'
param privateEndpointSubnetPrefix = '10.0.1.0/24'
