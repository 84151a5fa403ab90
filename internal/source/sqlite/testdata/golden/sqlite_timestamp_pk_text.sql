-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE "updated_at" < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', ?) || '000Z') ORDER BY "updated_at", "id" LIMIT ?
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE ("updated_at", "id") > (?, ?) AND "updated_at" < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', ?) || '000Z') ORDER BY "updated_at", "id" LIMIT ?
-- stamp check (argument [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z)
SELECT "updated_at", "id" FROM "orders" WHERE NOT ("updated_at" GLOB ?) LIMIT 1
