-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "orders" ORDER BY "id" LIMIT $1
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE "id" > $1 ORDER BY "id" LIMIT $2
-- pending first
SELECT 1 FROM "orders" LIMIT 1
-- pending after
SELECT 1 FROM "orders" WHERE "id" > $1 LIMIT 1
