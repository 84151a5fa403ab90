-- fetch first
SELECT "id", "customer", "amount", "updated_at", "txid" FROM "public"."orders" WHERE "txid" < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY "txid", "id" LIMIT $1
-- fetch after
SELECT "id", "customer", "amount", "updated_at", "txid" FROM "public"."orders" WHERE ("txid", "id") > ($1::text::xid8, $2) AND "txid" < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY "txid", "id" LIMIT $3
-- backlog first (no bound on open transactions)
SELECT "id", "customer", "amount", "updated_at", "txid" FROM "public"."orders" ORDER BY "txid", "id" LIMIT $1
-- backlog after
SELECT "id", "customer", "amount", "updated_at", "txid" FROM "public"."orders" WHERE ("txid", "id") > ($1::text::xid8, $2) ORDER BY "txid", "id" LIMIT $3
