// A private endpoint of one service of a resource (a storage account's blob or queue service, a
// Service Bus or Event Hubs namespace, an Event Grid topic) in the private endpoints' subnet, with
// its address recorded in the private DNS zone that modules/network.bicep made and linked: from
// the network, the service's usual name resolves to the private address.
param name string
param location string
param tags object = {}
param subnetId string

@description('The resource id of the account, namespace or topic.')
param targetId string

@description('The service: blob, queue or table (storage), namespace (Service Bus, Event Hubs), topic (Event Grid).')
param groupId string

@description('The private DNS zone of that service (its resource id).')
param zoneId string

resource endpoint 'Microsoft.Network/privateEndpoints@2024-01-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    subnet: {
      id: subnetId
    }
    privateLinkServiceConnections: [
      {
        name: name
        properties: {
          privateLinkServiceId: targetId
          groupIds: [
            groupId
          ]
        }
      }
    ]
  }
}

resource zoneGroup 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-01-01' = {
  parent: endpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: groupId
        properties: {
          privateDnsZoneId: zoneId
        }
      }
    ]
  }
}

output id string = endpoint.id
