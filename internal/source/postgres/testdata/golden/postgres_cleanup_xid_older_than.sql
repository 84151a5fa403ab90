-- fetch first
SELECT "id", "customer", "amount", "updated_at", "txid" FROM "public"."orders" WHERE "txid" < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY "txid", "id" LIMIT $1
-- fetch after
SELECT "id", "customer", "amount", "updated_at", "txid" FROM "public"."orders" WHERE ("txid", "id") > ($1::text::xid8, $2) AND "txid" < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY "txid", "id" LIMIT $3
-- backlog first (no bound on open transactions)
SELECT "id", "customer", "amount", "updated_at", "txid" FROM "public"."orders" ORDER BY "txid", "id" LIMIT $1
-- backlog after
SELECT "id", "customer", "amount", "updated_at", "txid" FROM "public"."orders" WHERE ("txid", "id") > ($1::text::xid8, $2) ORDER BY "txid", "id" LIMIT $3
-- cleanup (delete delivered rows older than 168h0m0s)
DELETE FROM "public"."orders" WHERE "id" IN (SELECT "id" FROM "public"."orders" WHERE ("txid", "id") <= ($1::text::xid8, $2) AND "updated_at" < now() - make_interval(secs => $3) ORDER BY "txid", "id" LIMIT $4) AND ("txid", "id") <= ($5::text::xid8, $6) AND "updated_at" < now() - make_interval(secs => $7)
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT 1 FROM "public"."orders" WHERE ("txid", "id") <= ($1::text::xid8, $2) AND "updated_at" < now() - make_interval(secs => $3) LIMIT $4) w
