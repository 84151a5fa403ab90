-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE "updated_at" < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', ?) || '000Z') ORDER BY "updated_at", "customer", "id" LIMIT ?
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE ("updated_at", "customer", "id") > (?, ?, ?) AND "updated_at" < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', ?) || '000Z') ORDER BY "updated_at", "customer", "id" LIMIT ?
-- stamp check (argument [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]Z)
SELECT "updated_at", "customer", "id" FROM "orders" WHERE NOT ("updated_at" GLOB ?) LIMIT 1
-- cleanup (delete delivered rows older than 168h0m0s)
DELETE FROM "orders" WHERE ("customer", "id") IN (SELECT "customer", "id" FROM "orders" WHERE ("updated_at", "customer", "id") <= (?, ?, ?) AND "updated_at" < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', ?) || '000Z') ORDER BY "updated_at", "customer", "id" LIMIT ?) AND ("updated_at", "customer", "id") <= (?, ?, ?) AND "updated_at" < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', ?) || '000Z')
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT 1 FROM "orders" WHERE ("updated_at", "customer", "id") <= (?, ?, ?) AND "updated_at" < (SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now', ?) || '000Z') LIMIT ?) w
