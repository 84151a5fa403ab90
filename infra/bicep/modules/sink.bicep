// One entry of main.bicep's sinks array, deployed to the target's resource group: the app's
// identity gets the built-in sender role on the target itself (the storage queue, the Service Bus
// queue or topic, the event hub, the Event Grid topic), and the output is the entry's identity-based
// app settings, X__<endpoint>, X__credential and X__clientId for the connection X. No key, no
// connection string: the sink signs in as the app's identity.
//
// The target must exist: it is referenced with existing, never created, changed or deleted (a
// queue in an account the app does not own is its owner's to create). A missing one fails the
// deployment at its role assignment.

@description('One entry of main.bicep\'s sinks array: connection, type (storagequeue|servicebus|eventhubs|eventgrid) and the target\'s names.')
param sink object

@description('The app\'s user-assigned identity (principal id): the role assignment\'s principal.')
param principalId string

@description('The app\'s user-assigned identity (client id): X__clientId.')
param clientId string

var type = sink.type

// The app setting suffix of each sink type, as a Functions binding connection names it. An
// unknown type fails the deployment here.
var endpointSetting = {
  storagequeue: 'queueServiceUri'
  servicebus: 'fullyQualifiedNamespace'
  eventhubs: 'fullyQualifiedNamespace'
  eventgrid: 'topicEndpointUri'
}[type]

// The target's names; those of the other types are placeholders, never deployed (ARM skips a
// resource whose condition is false, but still builds its name and scope).
var storageAccountName = sink.?storageAccountName ?? 'none'
var queueName = sink.?queueName ?? 'none'
var topicName = sink.?topicName ?? 'none'
var namespaceName = sink.?namespaceName ?? 'none'
var hubName = sink.?hubName ?? 'none'
var serviceBusToQueue = type == 'servicebus' && contains(sink, 'queueName')

// Built-in role definition ids.
var storageQueueDataMessageSender = 'c6a89b2d-59bc-44d0-9896-0f6e12d7b80a'
var serviceBusDataSender = '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
var eventHubsDataSender = '2b629674-e913-4c01-ae53-ef4638d8f975'
var eventGridDataSender = 'd5a91429-5739-47e2-a06b-3470a27159e7'

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' existing = {
  parent: storageAccount
  name: 'default'
}

resource storageQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' existing = {
  parent: queueService
  name: queueName
}

resource serviceBus 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource serviceBusQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: serviceBus
  name: queueName
}

resource serviceBusTopic 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' existing = {
  parent: serviceBus
  name: topicName
}

resource eventHubs 'Microsoft.EventHub/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource eventHub 'Microsoft.EventHub/namespaces/eventhubs@2024-01-01' existing = {
  parent: eventHubs
  name: hubName
}

resource eventGridTopic 'Microsoft.EventGrid/topics@2025-02-15' existing = {
  name: topicName
}

// Send only, on the one queue (not the account: no other queue, no reading or deleting messages).
resource queueSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (type == 'storagequeue') {
  name: guid(storageQueue.id, principalId, storageQueueDataMessageSender)
  scope: storageQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageQueueDataMessageSender)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// Send only, on the one Service Bus queue...
resource serviceBusQueueSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (serviceBusToQueue) {
  name: guid(serviceBusQueue.id, principalId, serviceBusDataSender)
  scope: serviceBusQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// ...or topic (not the namespace).
resource serviceBusTopicSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (type == 'servicebus' && !serviceBusToQueue) {
  name: guid(serviceBusTopic.id, principalId, serviceBusDataSender)
  scope: serviceBusTopic
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// Send only, on the one event hub (not the namespace).
resource eventHubSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (type == 'eventhubs') {
  name: guid(eventHub.id, principalId, eventHubsDataSender)
  scope: eventHub
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', eventHubsDataSender)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// Publish only, on the one Event Grid topic.
resource eventGridSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (type == 'eventgrid') {
  name: guid(eventGridTopic.id, principalId, eventGridDataSender)
  scope: eventGridTopic
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', eventGridDataSender)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// The endpoint: the queue service of the account, the namespace's host name, or the topic's own
// endpoint (read from the topic; ARM evaluates only the branch taken).
var endpoint = type == 'storagequeue' ? 'https://${storageAccountName}.queue.${environment().suffixes.storage}' : type == 'eventgrid' ? eventGridTopic.properties.endpoint : '${namespaceName}.servicebus.windows.net'

output settings object = {
  '${sink.connection}__${endpointSetting}': endpoint
  '${sink.connection}__credential': 'managedidentity'
  '${sink.connection}__clientId': clientId
}
