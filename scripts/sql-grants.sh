#!/usr/bin/env bash
# Prints the SQL a database administrator runs so that the function app's managed identity can
# read a poller's table (Bicep cannot grant database permissions).
#
#   scripts/sql-grants.sh IDENTITY_NAME TABLE [TABLE ...]     e.g. id-pseudotrigger-demo dbo.orders
#   scripts/sql-grants.sh --postgres [--logical] [--no-principal] [--psql] IDENTITY_NAME TABLE [TABLE ...]
#   scripts/sql-grants.sh --mysql [--client-id ID] [--no-principal] [--no-process] MYSQL_USER DATABASE.TABLE [...]
#
# Without options: Azure SQL / SQL Server, then the PostgreSQL and MySQL statements as comments.
# --postgres      only Azure Database for PostgreSQL, runnable: the Entra principal (in the
#                 postgres database), then USAGE on the schema and SELECT on each table
# --logical       (PostgreSQL) add ALTER ROLE ... WITH REPLICATION, for the logical cursor
# --no-principal  (PostgreSQL) the role exists already (a password role): skip its creation
# --psql          (PostgreSQL) run them with psql instead of printing: the server and the admin
#                 come from PGHOST, PGUSER, PGDATABASE (the poller's database), PGPASSWORD and
#                 PGSSLMODE, e.g. PGPASSWORD=$(az account get-access-token --resource-type
#                 oss-rdbms --query accessToken -o tsv) for an Entra admin
# --mysql         only Azure Database for MySQL Flexible Server, runnable (pipe them to mysql):
#                 the Entra user (CREATE AADUSER, as the server's Microsoft Entra admin), SELECT
#                 on each table and PROCESS (a timestamp+pk cursor reads the open transactions in
#                 information_schema.innodb_trx to stay behind late commits). E.g.
#                 ... | mysql -h srv.mysql.database.azure.com -u admin@contoso.com --ssl-mode=REQUIRED
#                 --enable-cleartext-plugin --password="$(az account get-access-token --resource-type
#                 oss-rdbms --query accessToken -o tsv)"
# --client-id ID  (MySQL) map the user to the managed identity with this client id (a user-assigned
#                 identity's clientId; the system-assigned identity's application id) instead of
#                 looking the name up in Microsoft Entra ID
# --no-principal  (MySQL) the user exists already (made before, or a password user): grants only
# --no-process    (MySQL) no PROCESS: timestamp+pk pollers are then kept behind late commits by
#                 their settle lag alone (their status and tick lines say so)
set -euo pipefail
usage() { sed -n '2,30p' "$0"; exit 2; }
postgres=0 mysql=0 logical=0 principal=1 run=0 client_id="" process=1
while [ $# -gt 0 ]; do
  case "$1" in
    --postgres) postgres=1 ;;
    --mysql) mysql=1 ;;
    --client-id)
      [ $# -ge 2 ] || { echo "sql-grants.sh: --client-id needs the identity's client id" >&2; exit 2; }
      client_id=$2; shift ;;
    --logical) logical=1 ;;
    --no-principal) principal=0 ;;
    --no-process) process=0 ;;
    --psql) run=1 postgres=1 ;;
    -h | --help) usage ;;
    --) shift; break ;;
    -*) echo "sql-grants.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
  shift
done
[ $# -ge 2 ] || usage
identity=$1; shift
if [ "$postgres" = 1 ] && [ "$mysql" = 1 ]; then
  echo "sql-grants.sh: --postgres and --mysql exclude each other" >&2
  exit 2
fi
if [ "$mysql" = 1 ] && [ "$logical" = 1 ]; then
  echo "sql-grants.sh: --logical is a PostgreSQL option (MySQL has no logical cursor)" >&2
  exit 2
fi
if [ "$mysql" = 0 ] && { [ -n "$client_id" ] || [ "$process" = 0 ]; }; then
  echo "sql-grants.sh: --client-id and --no-process are MySQL options: add --mysql" >&2
  exit 2
fi
if [ "$postgres" = 0 ] && [ "$mysql" = 0 ] && { [ "$logical" = 1 ] || [ "$principal" = 0 ]; }; then
  echo "sql-grants.sh: --logical and --no-principal are PostgreSQL options: add --postgres" >&2
  exit 2
fi

# PostgreSQL: the identity as a string literal and as a quoted identifier.
pg_literal="'${identity//\'/\'\'}'"
pg_ident="\"${identity//\"/\"\"}\""

# pg_principal prints the statement that makes the Entra role (idempotent: skipped when the role
# exists). It runs in the postgres database, as a Microsoft Entra admin of the server.
pg_principal() {
  cat <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $pg_literal) THEN
    PERFORM pgaadauth_create_principal($pg_literal, false, false);
  END IF;
END \$\$;
SQL
}

# pg_grants prints the grants in the poller's database: USAGE on each table's schema, SELECT on
# each table, and with --logical the REPLICATION attribute.
pg_grants() {
  local table schema seen=" "
  for table in "$@"; do
    schema=public
    case "$table" in *.*) schema=${table%%.*} ;; esac
    case "$seen" in *" $schema "*) ;; *)
      echo "GRANT USAGE ON SCHEMA $schema TO $pg_ident;"
      seen="$seen$schema "
    esac
  done
  for table in "$@"; do
    echo "GRANT SELECT ON $table TO $pg_ident;"
  done
  if [ "$logical" = 1 ]; then
    echo "ALTER ROLE $pg_ident WITH REPLICATION;"
  fi
}

# MySQL: the user as a string literal, the account it names ('user'@'%', as CREATE AADUSER makes
# it), and the client id as a literal.
my_literal="'${identity//\'/\'\'}'"
my_account="$my_literal@'%'"
my_client="'${client_id//\'/\'\'}'"

# my_principal prints the statements that make the Entra user, as the server's Microsoft Entra
# admin: mapped to the client id when --client-id gives one (a managed identity), else looked up
# by name (the server's identity needs Microsoft Graph read permissions for that).
my_principal() {
  if [ -n "$client_id" ]; then
    echo "SET aad_auth_validate_oids_in_tenant = OFF;"
    echo "CREATE AADUSER $my_literal IDENTIFIED BY $my_client;"
  else
    echo "CREATE AADUSER $my_literal;"
  fi
}

# my_grants prints SELECT on each table (DATABASE.TABLE): all a poller reads; and PROCESS unless
# --no-process, for the open transactions a timestamp+pk cursor stays behind
# (information_schema.innodb_trx).
my_grants() {
  local table
  for table in "$@"; do
    echo "GRANT SELECT ON $table TO $my_account;"
  done
  if [ "$process" = 1 ]; then
    echo "-- PROCESS lets timestamp+pk pollers see the open transactions (information_schema.innodb_trx) and stay"
    echo "-- behind their rows until they commit; without it (--no-process) only the settle lag does."
    echo "GRANT PROCESS ON *.* TO $my_account;"
  fi
}

if [ "$mysql" = 1 ]; then
  # A bare TABLE would be granted in whatever database the admin's client has selected (or be
  # refused by MySQL with "No database selected"): the database is required.
  for table in "$@"; do
    case "$table" in
      ?*.?*) ;;
      *) echo "sql-grants.sh: --mysql: $table lacks its DATABASE: write DATABASE.TABLE (e.g. shop.$table), the database the poller's {P}_DB_CONNECTION names" >&2
        exit 2 ;;
    esac
  done
  if [ "$principal" = 1 ]; then
    echo "-- Azure Database for MySQL Flexible Server, as its Microsoft Entra admin:"
    my_principal
  else
    echo "-- MySQL, as an admin (the user exists):"
  fi
  my_grants "$@"
  exit 0
fi

if [ "$postgres" = 1 ]; then
  if [ "$run" = 1 ]; then
    command -v psql >/dev/null 2>&1 || { echo "sql-grants.sh: --psql needs psql (Debian: apt-get install postgresql-client)" >&2; exit 1; }
    if [ -z "${PGHOST:-}" ] || [ -z "${PGUSER:-}" ] || [ -z "${PGDATABASE:-}" ]; then
      echo "sql-grants.sh: --psql needs PGHOST, PGUSER and PGDATABASE (the poller's database), and PGPASSWORD or ~/.pgpass" >&2
      exit 2
    fi
    if [ "$principal" = 1 ]; then
      pg_principal | psql -X -q -v ON_ERROR_STOP=1 -d postgres
    fi
    pg_grants "$@" | psql -X -q -v ON_ERROR_STOP=1
    echo "sql-grants.sh: granted $identity on $PGHOST/$PGDATABASE: $*" >&2
    exit 0
  fi
  if [ "$principal" = 1 ]; then
    echo "-- Azure Database for PostgreSQL, as a Microsoft Entra admin, in the postgres database:"
    pg_principal
    echo
  fi
  echo "-- In the poller's database, as the server's admin (a member of azure_pg_admin):"
  pg_grants "$@"
  exit 0
fi

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

-- PostgreSQL (Azure Database for PostgreSQL Flexible Server; scripts/sql-grants.sh --postgres
-- prints these runnable, --psql runs them). As a Microsoft Entra admin, in the postgres database:
SQL
pg_principal | sed 's/^/--   /'
echo "-- In the poller's database, as the server's admin (a member of azure_pg_admin):"
pg_grants "$@" | sed 's/^/--   /'
echo "--   ALTER ROLE $pg_ident WITH REPLICATION;   -- logical cursor only"
cat <<'SQL'
-- The xid cursor reads pg_current_snapshot(), available to every role; the logical cursor also
-- needs REPLICATION (and wal_level=logical on the server). The PostgreSQL DSN then signs in with
-- the identity's token: user=<IDENTITY_NAME> fedauth=ActiveDirectoryManagedIdentity
-- azure_client_id=<its client id> sslmode=require (docs/postgres.md: Signing in with Microsoft Entra ID).

-- MySQL (Azure Database for MySQL Flexible Server; scripts/sql-grants.sh --mysql [--client-id ID]
-- prints these runnable). As the server's Microsoft Entra admin:
SQL
my_principal | sed 's/^/--   /'
my_grants "$@" | sed 's/^/--   /'
cat <<'SQL'
-- The tables are DATABASE.TABLE. The MySQL DSN then signs in with the identity's token:
-- <IDENTITY_NAME>@tcp(<server>.mysql.database.azure.com:3306)/<database>?tls=true
-- &fedauth=ActiveDirectoryManagedIdentity&azure_client_id=<its client id> (docs/mysql.md: Signing in with Microsoft Entra ID).
SQL
