// An example: one entry per pollers/<name> folder (CI checks that every poller has one).
using 'main.bicep'

param appName = 'pseudotrigger-demo'

param pollers = [
  {
    name: 'orders'
    driver: 'sqlserver'
    server: 'contoso-sql.database.windows.net'
    database: 'shop'
    schedule: '*/30 * * * * *'
  }
]
