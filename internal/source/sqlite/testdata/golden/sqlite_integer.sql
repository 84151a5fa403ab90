-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "orders" ORDER BY "id" LIMIT ?
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE "id" > ? ORDER BY "id" LIMIT ?
