-- fetch first
SELECT "id", "customer", "amount", "updated_at" FROM "public"."orders" WHERE "updated_at" < (now() AT TIME ZONE 'UTC') - make_interval(secs => $1) ORDER BY "updated_at", "customer", "id" LIMIT $2
-- fetch after
SELECT "id", "customer", "amount", "updated_at" FROM "public"."orders" WHERE ("updated_at", "customer", "id") > ($1, $2, $3) AND "updated_at" < (now() AT TIME ZONE 'UTC') - make_interval(secs => $4) ORDER BY "updated_at", "customer", "id" LIMIT $5
-- stamp check (argument 600)
SELECT "updated_at", "customer", "id" FROM "public"."orders" WHERE "updated_at" > (now() AT TIME ZONE 'UTC') + make_interval(secs => $1) LIMIT 1
-- cleanup (delete delivered rows older than 36h0m0s)
DELETE FROM "public"."orders" WHERE ("customer", "id") IN (SELECT "customer", "id" FROM "public"."orders" WHERE ("updated_at", "customer", "id") <= ($1, $2, $3) AND "updated_at" < (now() AT TIME ZONE 'UTC') - make_interval(secs => $4) ORDER BY "updated_at", "customer", "id" LIMIT $5) AND ("updated_at", "customer", "id") <= ($6, $7, $8) AND "updated_at" < (now() AT TIME ZONE 'UTC') - make_interval(secs => $9)
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT 1 FROM "public"."orders" WHERE ("updated_at", "customer", "id") <= ($1, $2, $3) AND "updated_at" < (now() AT TIME ZONE 'UTC') - make_interval(secs => $4) LIMIT $5) w
