// The private network of main.bicep's vnetEnabled, in the shape of Microsoft's Flex Consumption
// azd templates (functions-quickstart-dotnet-azd and functions-e2e-sb-vnet): a virtual network
// with a subnet delegated to Microsoft.App/environments for the function app's outbound traffic
// and a subnet for private endpoints, or the existing subnets of a network peered with the
// database's; and the private DNS zones the private endpoints register in, each linked once to
// the network (two accounts share the blob zone: a zone and its link are made here once, the
// endpoints in modules/privateendpoint.bicep only add their records).
param name string
param location string
param tags object = {}

@description('Address space of the virtual network made here (unused with existing subnets).')
param addressPrefix string

@description('The app\'s subnet, delegated to Microsoft.App/environments (a /27 at least; Microsoft\'s samples use a /24).')
param appSubnetPrefix string

@description('The private endpoints\' subnet.')
param privateEndpointSubnetPrefix string

@description('An existing subnet for the app, delegated to Microsoft.App/environments, in a network that reaches the database (peered with its network); empty: a network is made here.')
param existingAppSubnetId string = ''

@description('An existing subnet for the private endpoints, in the same network as existingAppSubnetId.')
param existingPrivateEndpointSubnetId string = ''

@description('The private DNS zones to make and link to the network, by name (privatelink.blob. and the storage suffix, ...).')
param zoneNames array

var made = empty(existingAppSubnetId)
var vnetName = 'vnet-${name}'

resource vnet 'Microsoft.Network/virtualNetworks@2024-01-01' = if (made) {
  name: vnetName
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        addressPrefix
      ]
    }
    subnets: [
      {
        name: 'app'
        properties: {
          addressPrefix: appSubnetPrefix
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
          privateEndpointNetworkPolicies: 'Disabled'
          privateLinkServiceNetworkPolicies: 'Enabled'
        }
      }
      {
        name: 'private-endpoints'
        properties: {
          addressPrefix: privateEndpointSubnetPrefix
          privateEndpointNetworkPolicies: 'Disabled'
          privateLinkServiceNetworkPolicies: 'Enabled'
        }
      }
    ]
  }
}

// The network the subnets are in: made here, or the existing app subnet's (its id without
// /subnets/<name>).
var vnetId = made ? resourceId('Microsoft.Network/virtualNetworks', vnetName) : join(take(split(existingAppSubnetId, '/'), 9), '/')

resource zones 'Microsoft.Network/privateDnsZones@2020-06-01' = [for z in zoneNames: {
  name: z
  location: 'global'
  tags: tags
}]

resource links 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2020-06-01' = [for (z, i) in zoneNames: {
  parent: zones[i]
  name: 'link-${name}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnetId
    }
  }
  dependsOn: [
    vnet
  ]
}]

output appSubnetId string = made ? resourceId('Microsoft.Network/virtualNetworks/subnets', vnetName, 'app') : existingAppSubnetId
output privateEndpointSubnetId string = made ? resourceId('Microsoft.Network/virtualNetworks/subnets', vnetName, 'private-endpoints') : existingPrivateEndpointSubnetId
output vnetId string = vnetId
