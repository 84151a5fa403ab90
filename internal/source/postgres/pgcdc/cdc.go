// Package pgcdc is what a logical poller reads on PostgreSQL besides its table, and its
// administration: the replication slot (SlotState, and Position, a place in the slot's stream);
// the publication of the poller's tables, with its row filter and column list (and the check the
// reader makes of them as it opens); making and dropping both (Admin: `pollerctl cdc enable` and
// `disable`, and the rules `pollerctl reset` and `clone` keep with them); what `pollerctl check`
// offers of the table's replica identity; and what the status shows of the slot. The reader of
// the slot's stream is package postgres's logical cursor, which imports this package.
//
// A logical poller reads a replication slot (plugin pgoutput) through a publication of its table.
// Both are made here, outside the tick: the tick never creates or drops anything. Creating them
// needs privileges the poller's role may lack for reading (see Info.Needs), and a slot, once
// made, keeps every WAL segment it has not confirmed: a slot nobody advances fills the disk. So
// they are made and dropped on purpose, by an operator, and shown by the status.
//
// Names: slot and publication names are checked by the postgres driver's CheckSlotName
// (lower-case letters, digits and '_') and still quoted where they are identifiers; the table is
// quoted as the reader quotes it; every value (a slot name passed to a function, an LSN) is a
// bound parameter.
package pgcdc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// ErrSetup: the database cannot take, or keep, the logical cursor's set-up as asked (a
// privilege is missing, a slot or publication of that name exists but is something else, the
// table's replica identity is NOTHING, ...). Nothing was created or dropped; the error names the
// fix.
var ErrSetup = errors.New("cannot set up logical decoding")

// Admin is a connection to a logical poller's database for setting up (and tearing down) its slot
// and publication. It needs no slot to exist, unlike source.Open.
type Admin struct {
	poller   string
	db       *sql.DB
	def      sourcedef.Definition
	table    string // quoted
	describe string
	parts    []*Admin // the poller's more tables (Definition.More), each alone, on db
	multi    bool     // one of the tables of a poller of several
}

// Open connects to the database of a logical poller (cfg as for source.Open with the drivers ds:
// the definition must be valid, with its Slot and Publication, and its cursor kind logical on
// postgres), on one connection, as source.OpenCDC does for the driver. It checks nothing of the
// table: Inspect does.
func Open(ctx context.Context, ds driver.Drivers, cfg source.Config) (*Admin, error) {
	if err := logicalOnly(cfg.Poller, cfg.Definition); err != nil {
		return nil, err
	}
	cfg.MaxOpenConns = 1
	db, describe, err := source.Connect(ctx, ds, cfg)
	if err != nil {
		return nil, err
	}
	c, err := New(driver.Conn{Poller: cfg.Poller, Definition: cfg.Definition, DB: db, Describe: describe})
	if err != nil {
		db.Close()
		return nil, err
	}
	return c, nil
}

// New administers the slot and publication of the logical poller on c (Close closes c.DB).
func New(c driver.Conn) (*Admin, error) {
	d := c.Definition
	if err := logicalOnly(c.Poller, d); err != nil {
		return nil, err
	}
	out := &Admin{poller: c.Poller, db: c.DB, def: d, describe: c.Describe}
	if !d.ReadsMessages() { // a messages outbox reads no table
		out.table = driver.QuoteTable(driver.Defaults{}, d.Table)
	}
	for _, t := range d.More {
		out.parts = append(out.parts, &Admin{poller: c.Poller, db: c.DB, def: d.Part(t), table: driver.QuoteTable(driver.Defaults{}, t.Table), describe: c.Describe, multi: true})
	}
	out.multi = len(out.parts) > 0
	return out, nil
}

// logicalOnly refuses a definition of another cursor kind than logical, before anything connects.
func logicalOnly(poller string, d sourcedef.Definition) error {
	if d.Cursor.Kind != state.KindLogical {
		return fmt.Errorf("source: poller %q: %w: its cursor kind is %s; a slot and a publication are for logical pollers only (cursor kind logical, PostgreSQL)",
			poller, ErrSetup, d.Cursor.Kind)
	}
	return nil
}

// Close closes the connection.
func (c *Admin) Close() error { return c.db.Close() }

// DB returns the connection pool (one connection).
func (c *Admin) DB() *sql.DB { return c.db }

// String describes the database and table without secrets.
func (c *Admin) String() string { return c.describe }

// Slot is the replication slot's name the poller's settings give.
func (c *Admin) Slot() string { return c.def.Slot }

// Publication is the publication's name the poller's settings give.
func (c *Admin) Publication() string { return c.def.Publication }

// Table is the table, quoted as in the SQL.
func (c *Admin) Table() string { return c.table }

// CreatePublicationSQL is the statement Enable runs to create the publication: of the table as
// the poller needs it (Info.Want: its row filter and column list); of no table for a messages
// outbox (pgoutput needs a publication to decode, and sends the messages whatever it publishes).
func (c *Admin) CreatePublicationSQL(info Info) string {
	if c.def.ReadsMessages() {
		return "CREATE PUBLICATION " + pgIdent(c.def.Publication)
	}
	return createSQL(c.def.Publication, c.specs(info))
}

// createSQL creates publication pub of tables (their specs: tableSpec) for every operation.
func createSQL(pub, tables string) string {
	return "CREATE PUBLICATION " + pgIdent(pub) + " FOR TABLE " + tables + " WITH (publish = 'insert, update, delete, truncate')"
}

// addSQL adds the table, published as want, to publication pub.
func addSQL(pub, table string, want pubTable) string {
	return "ALTER PUBLICATION " + pgIdent(pub) + " ADD TABLE " + tableSpec(table, want)
}

// tables are the poller's tables with their infos (info's, and info.More's), the first first.
func (c *Admin) tables(info Info) ([]*Admin, []Info) {
	return append([]*Admin{c}, c.parts...), append([]Info{info}, info.More...)
}

// specs are the poller's tables as the publication's table list names them (tableSpec).
func (c *Admin) specs(info Info) string {
	out := tableSpec(c.table, info.Want)
	for i, p := range c.parts {
		out += ", " + tableSpec(p.table, info.More[i].Want)
	}
	return out
}

// AlterPublicationSQL is the statement Enable runs when the publication publishes the table
// otherwise than the poller needs ("" when it does not). A poller of several tables: the tables
// it lacks are added too (publishes tells whether it publishes tables not the poller's: one SET
// TABLE of them all when not, else a statement a table).
func (c *Admin) AlterPublicationSQL(info Info) string {
	if len(c.parts) == 0 {
		if !info.alter() {
			return ""
		}
		return alterSQL(c.def.Publication, c.table, info.Publication.Tables, info.Want)
	}
	pub := info.Publication
	if !pub.Exists || pub.AllTables {
		return ""
	}
	var stmts []string
	covered := 0
	all, infos := c.tables(info)
	for i, p := range all {
		ti := infos[i]
		switch {
		case !ti.Publication.Covers:
			stmts = append(stmts, addSQL(c.def.Publication, p.table, ti.Want))
		case ti.alter():
			covered++
			stmts = append(stmts, alterSQL(c.def.Publication, p.table, 2, ti.Want))
		default:
			covered++
		}
	}
	switch {
	case len(stmts) == 0:
		return ""
	case pub.Tables == covered: // it publishes the poller's tables alone
		return "ALTER PUBLICATION " + pgIdent(c.def.Publication) + " SET TABLE " + c.specs(info)
	}
	return strings.Join(stmts, "; ")
}

// createSlotSQL is the statement Enable runs to create the slot ($1: the slot's name).
const createSlotSQL = "SELECT pg_create_logical_replication_slot($1, 'pgoutput')"

// dropSlotSQL is the statement Disable runs to drop the slot ($1: the slot's name).
const dropSlotSQL = "SELECT pg_drop_replication_slot($1)"

// DropPublicationSQL is the statement Disable runs to drop the publication.
func (c *Admin) DropPublicationSQL() string { return "DROP PUBLICATION " + pgIdent(c.def.Publication) }

// pgIdent quotes an identifier as the postgres driver does (its Quote is driver.Defaults').
func pgIdent(s string) string { return driver.Defaults{}.Quote(s) }

// Inspect reads the set-up (Info) in one query; it writes nothing.
func (c *Admin) Inspect(ctx context.Context) (Info, error) {
	const q = `SELECT current_setting('wal_level'), current_database()::text, current_user::text, r.rolsuper, r.rolreplication,
  has_database_privilege(current_database(), 'CREATE'),
  cl.oid IS NOT NULL, COALESCE(quote_ident(n.nspname) || '.' || quote_ident(cl.relname), ''),
  COALESCE(pg_has_role(cl.relowner, 'USAGE'), false), COALESCE(has_table_privilege(cl.oid, 'SELECT'), false),
  COALESCE(pg_get_userbyid(cl.relowner)::text, ''),
  COALESCE(CASE cl.relreplident WHEN 'd' THEN 'default' WHEN 'f' THEN 'full' WHEN 'i' THEN 'index' WHEN 'n' THEN 'nothing' END, ''),
  COALESCE((SELECT array_to_json(array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum)))::text
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey::int2[])
    WHERE i.indrelid = cl.oid AND (CASE cl.relreplident WHEN 'i' THEN i.indisreplident ELSE i.indisprimary END)), '[]'),
  p.oid IS NOT NULL, COALESCE(p.puballtables, false),
  COALESCE(EXISTS (SELECT 1 FROM pg_publication_tables pt WHERE pt.pubname = $1 AND pt.schemaname = n.nspname AND pt.tablename = cl.relname), false),
  COALESCE(array_to_json(array_remove(ARRAY[CASE WHEN p.pubinsert THEN 'insert' END, CASE WHEN p.pubupdate THEN 'update' END,
    CASE WHEN p.pubdelete THEN 'delete' END, CASE WHEN p.pubtruncate THEN 'truncate' END], NULL))::text, '[]'),
  (SELECT count(*) FROM pg_publication_tables pt WHERE pt.pubname = $1)::int,
  current_setting('server_version_num')::int, COALESCE(cl.oid::int8, 0),
  COALESCE((SELECT array_to_json(array_agg(a.attname::text ORDER BY a.attnum))::text FROM pg_attribute a
    WHERE a.attrelid = cl.oid AND a.attnum > 0 AND NOT a.attisdropped), '[]')
FROM pg_roles r
LEFT JOIN pg_class cl ON cl.oid = to_regclass(NULLIF($2, ''))
LEFT JOIN pg_namespace n ON n.oid = cl.relnamespace
LEFT JOIN pg_publication p ON p.pubname = $1
WHERE r.rolname = current_user`
	var (
		info                       Info
		identCols, publishes, cols string
		oid                        int64
	)
	info.Publication.Name = c.def.Publication
	err := c.db.QueryRowContext(ctx, q, c.def.Publication, c.table).Scan(&info.WALLevel, &info.Database, &info.User, &info.Superuser,
		&info.Replication, &info.CreateOnDatabase, &info.TableExists, &info.TableName, &info.OwnsTable, &info.CanSelect, &info.Owner,
		&info.ReplicaIdentity, &identCols, &info.Publication.Exists, &info.Publication.AllTables, &info.Publication.Covers,
		&publishes, &info.Publication.Tables, &info.ServerVersion, &oid, &cols)
	if err != nil {
		return info, fmt.Errorf("source: poller %q, table %s: reading the logical decoding set-up: %w", c.poller, c.def.Table, err)
	}
	if err := json.Unmarshal([]byte(identCols), &info.IdentityColumns); err != nil {
		return info, fmt.Errorf("source: poller %q: the replica identity's columns %s: %w", c.poller, identCols, err)
	}
	if err := json.Unmarshal([]byte(publishes), &info.Publication.Publishes); err != nil {
		return info, fmt.Errorf("source: poller %q: the publication's operations %s: %w", c.poller, publishes, err)
	}
	if err := json.Unmarshal([]byte(cols), &info.Columns); err != nil {
		return info, fmt.Errorf("source: poller %q: the table's columns %s: %w", c.poller, cols, err)
	}
	if info.Slot, err = SlotStatus(ctx, c.db, c.def.Slot); err != nil {
		return info, fmt.Errorf("source: poller %q: %w", c.poller, err)
	}
	if err := c.inspectFilters(ctx, &info, oid); err != nil {
		return info, fmt.Errorf("source: poller %q, table %s: %w", c.poller, c.def.Table, err)
	}
	for _, p := range c.parts {
		pi, err := p.Inspect(ctx)
		if err != nil {
			return info, err
		}
		info.More = append(info.More, pi)
	}
	return info, nil
}

// inspectFilters fills in how the publication publishes the table, how the poller needs it, and
// what PostgreSQL refuses of that (pubfilter.go).
func (c *Admin) inspectFilters(ctx context.Context, info *Info, oid int64) error {
	if !info.TableExists || info.ServerVersion < filtersSince {
		return nil
	}
	if info.Publication.Covers {
		var err error
		if info.Published, err = published(ctx, c.db, info.ServerVersion, c.def.Publication, oid); err != nil {
			return err
		}
	}
	normalized, err := normalizeFilter(ctx, c.db, c.table, c.def.Filter)
	if err != nil {
		info.FilterErr = err.Error()
		return nil
	}
	info.Want = wantTable(c.def, normalized, info.Columns, info.ReplicaIdentity)
	// The statement tried makes or changes the publication of this table alone (each table of
	// a poller of several is tried so): PostgreSQL's refusal is then this table's.
	create := ""
	switch {
	case info.Want.Filter == "" && info.Want.Columns == nil:
	case !info.Publication.Exists:
		create = createSQL(c.def.Publication, tableSpec(c.table, info.Want))
	case c.multi && !info.Publication.Covers && !info.Publication.AllTables: // a table added to the poller
		create = addSQL(c.def.Publication, c.table, info.Want)
	case info.alter():
		create = alterSQL(c.def.Publication, c.table, info.Publication.Tables, info.Want)
	}
	if create == "" || !(info.Superuser || info.CreateOnDatabase && info.OwnsTable) {
		return nil
	}
	info.Refused, err = probe(ctx, c.db, create, c.table)
	return err
}
