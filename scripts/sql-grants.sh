#!/usr/bin/env bash
# Prints the SQL a database administrator runs so that the function app's managed identity can
# read a poller's table (Bicep cannot grant database permissions).
#
#   scripts/sql-grants.sh IDENTITY_NAME TABLE [TABLE ...]     e.g. id-pseudotrigger-demo dbo.orders
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,6p' "$0"; exit 2; }
identity=$1; shift
cat <<SQL
-- Azure SQL / SQL Server, connected as an Entra ID admin, in the poller's database:
CREATE USER [$identity] FROM EXTERNAL PROVIDER;
SQL
for table in "$@"; do
  echo "GRANT SELECT ON $table TO [$identity];"
done
cat <<'SQL'
-- Cursor kinds: timestamp+pk and integer need only SELECT on the table. rowversion also reads
-- MIN_ACTIVE_ROWVERSION(), a built-in function every user may call: nothing more to grant.

-- PostgreSQL (Azure Database for PostgreSQL, Entra ID admin, in the poller's database):
--   SELECT * FROM pgaadauth_create_principal('<identity>', false, false);
--   GRANT SELECT ON <table> TO "<identity>";
-- The xid cursor reads pg_current_snapshot(), available to every role. The PostgreSQL DSN then
-- needs an Entra token as its password (not fetched by the handler today): use a password kept in
-- Key Vault and referenced from the app setting instead.
SQL
