-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "orders" ORDER BY "id" LIMIT ?
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE "id" > ? ORDER BY "id" LIMIT ?
-- pending first
SELECT 1 FROM "orders" LIMIT 1
-- pending after
SELECT 1 FROM "orders" WHERE "id" > ? LIMIT 1
