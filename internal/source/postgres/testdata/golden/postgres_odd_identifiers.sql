-- fetch first
SELECT "Row ID", "it's" FROM "my schema"."Order ""Details"" [x]" ORDER BY "Row ID" LIMIT $1
-- fetch after
SELECT "Row ID", "it's" FROM "my schema"."Order ""Details"" [x]" WHERE "Row ID" > $1 ORDER BY "Row ID" LIMIT $2
