-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE "updated_at" < now() - make_interval(secs => $1) AND (customer <> 'test') ORDER BY "updated_at", "id" LIMIT $2
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "orders" WHERE ("updated_at", "id") > ($1, $2) AND "updated_at" < now() - make_interval(secs => $3) AND (customer <> 'test') ORDER BY "updated_at", "id" LIMIT $4
-- cleanup (delete delivered rows)
DELETE FROM "orders" WHERE "id" IN (SELECT "id" FROM "orders" WHERE ("updated_at", "id") <= ($1, $2) AND (customer <> 'test') ORDER BY "updated_at", "id" LIMIT $3) AND ("updated_at", "id") <= ($4, $5) AND (customer <> 'test')
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT 1 FROM "orders" WHERE ("updated_at", "id") <= ($1, $2) AND (customer <> 'test') LIMIT $3) w
