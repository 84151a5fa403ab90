-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE "updated_at" < now() - make_interval(secs => $1) AND (customer <> 'test') ORDER BY "updated_at", "id" LIMIT $2
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE ("updated_at", "id") > ($1, $2) AND "updated_at" < now() - make_interval(secs => $3) AND (customer <> 'test') ORDER BY "updated_at", "id" LIMIT $4
