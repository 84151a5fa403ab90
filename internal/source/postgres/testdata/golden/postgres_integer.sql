-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "orders" ORDER BY "id" LIMIT $1
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE "id" > $1 ORDER BY "id" LIMIT $2
