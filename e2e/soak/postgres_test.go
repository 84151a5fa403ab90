package soak

import (
	"context"
	"database/sql"
	"fmt"

	pgsource "github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
)

// postgres is the soak's PostgreSQL: each scenario in a schema of its own, the poller as the
// test's role.
type postgres struct {
	conn *sql.DB
	dsn  string
}

func (postgres) String() string { return "PostgreSQL" }

func (p postgres) db() *sql.DB { return p.conn }

// create makes schema.events: a bigserial key, a version that an update trigger counts up, and
// the cursor columns as applications fill them: the timestamp at statement time, the transaction
// id of the writing transaction. The trigger sets both on update too.
func (p postgres) create(ctx context.Context, _ scenario, cleanup func(func())) (*table, error) {
	schema := testenv.Name("soak_")
	q := `"` + schema + `"`
	t := &table{quoted: q + ".events", name: "events", schema: schema,
		columns: []string{"id", "version", "writer", "updated_at", "txid"}, driver: pgsource.Name, dsn: p.dsn}
	if _, err := p.conn.ExecContext(ctx, `CREATE SCHEMA `+q); err != nil {
		return nil, fmt.Errorf("creating schema %s: %w", schema, err)
	}
	cleanup(func() { _, _ = p.conn.ExecContext(context.Background(), `DROP SCHEMA `+q+` CASCADE`) })
	for _, stmt := range []string{
		`CREATE TABLE ` + t.quoted + ` (
			id         BIGSERIAL PRIMARY KEY,
			version    BIGINT NOT NULL DEFAULT 1,
			writer     BIGINT NOT NULL,
			payload    TEXT NOT NULL,
			updated_at TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),
			txid       XID8 NOT NULL DEFAULT pg_current_xact_id())`,
		`CREATE INDEX ON ` + t.quoted + ` (updated_at, id)`,
		`CREATE INDEX ON ` + t.quoted + ` (txid, id)`,
		`CREATE FUNCTION ` + q + `.touch() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			NEW.version    := OLD.version + 1;
			NEW.updated_at := clock_timestamp();
			NEW.txid       := pg_current_xact_id();
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER touch BEFORE UPDATE ON ` + t.quoted + ` FOR EACH ROW EXECUTE FUNCTION ` + q + `.touch()`,
	} {
		if _, err := p.conn.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("creating the soak table in schema %s: %w", schema, err)
		}
	}
	return t, nil
}

func (postgres) insert(ctx context.Context, tx *sql.Tx, t *table, writer int, payload string) (k rowKey, err error) {
	err = tx.QueryRowContext(ctx, `INSERT INTO `+t.quoted+` (writer, payload) VALUES ($1, $2) RETURNING id, version`,
		writer, payload).Scan(&k.id, &k.version)
	return k, err
}

// update: the trigger counts the version up and takes the new timestamp and xid.
func (postgres) update(ctx context.Context, tx *sql.Tx, t *table, id int64, payload string) (k rowKey, err error) {
	err = tx.QueryRowContext(ctx, `UPDATE `+t.quoted+` SET payload = $1 WHERE id = $2 RETURNING id, version`,
		payload, id).Scan(&k.id, &k.version)
	return k, err
}

// settled: no row at or above the source's bound, xmin for xid and the clock minus the lag for
// timestamp+pk.
func (p postgres) settled(ctx context.Context, t *table, s scenario, _ tick.Source) (bool, error) {
	var q string
	var args []any
	switch s.kind {
	case state.KindXID:
		q = `SELECT NOT EXISTS (SELECT 1 FROM ` + t.quoted + ` WHERE txid >= pg_snapshot_xmin(pg_current_snapshot()))`
	case state.KindTimestampPK:
		q = `SELECT NOT EXISTS (SELECT 1 FROM ` + t.quoted + ` WHERE updated_at >= now() - make_interval(secs => $1))`
		args = []any{s.effectiveLag().Seconds()}
	default:
		return true, nil // no bound
	}
	var ok bool
	if err := p.conn.QueryRowContext(ctx, q, args...).Scan(&ok); err != nil {
		return false, fmt.Errorf("checking whether the rows are inside the bound: %w", err)
	}
	return ok, nil
}

func (postgres) missed(t *table, kind string, ids []int64) (string, []any) {
	cursor := `''`
	switch kind {
	case state.KindTimestampPK:
		cursor = `'updated_at ' || to_char(updated_at AT TIME ZONE 'UTC', 'HH24:MI:SS.US')`
	case state.KindXID:
		cursor = `'txid ' || txid::text`
	}
	return `SELECT id, version, writer, ` + cursor + ` FROM ` + t.quoted + ` WHERE id = ANY($1) ORDER BY id`, []any{ids}
}
