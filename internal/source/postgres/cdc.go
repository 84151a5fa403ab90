package postgres

// Setting up, inspecting and tearing down what the logical cursor reads (`pollerctl cdc enable`
// and `disable`, the status's look at the slot), and replaying a dead-lettered change of a
// change-stream cursor.
//
// A logical poller reads a replication slot (plugin pgoutput) through a publication of its table.
// Both are made here, outside the tick: the tick never creates or drops anything. Creating them
// needs privileges the poller's role may lack for reading (see CDCInfo.Needs), and a slot, once
// made, keeps every WAL segment it has not confirmed: a slot nobody advances fills the disk. So
// they are made and dropped on purpose, by an operator, and shown by the status.
//
// Names: slot and publication names are checked by CheckSlotName (lower-case letters, digits and
// '_') and still quoted where they are identifiers; the table is quoted as the reader quotes it;
// every value (a slot name passed to a function, an LSN) is a bound parameter.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// ErrCDCSetup: the database cannot take, or keep, the logical cursor's set-up as asked (a
// privilege is missing, a slot or publication of that name exists but is something else, the
// table's replica identity is NOTHING, ...). Nothing was created or dropped; the error names the
// fix.
var ErrCDCSetup = errors.New("cannot set up logical decoding")

// SlotState is what PostgreSQL says of a replication slot (pg_replication_slots).
type SlotState struct {
	Name     string `json:"name"`
	Exists   bool   `json:"exists"`
	Type     string `json:"type,omitempty"`     // logical or physical
	Plugin   string `json:"plugin,omitempty"`   // pgoutput for the logical cursor
	Database string `json:"database,omitempty"` // the database it decodes ("" for a physical slot)
	// Here: the slot is in the database the connection is to.
	Here bool `json:"here"`
	// Active: a connection is reading it right now. The logical cursor reads it with short SQL
	// calls, so it is active only while a tick reads.
	Active bool `json:"active"`
	// ConfirmedFlush is the position the slot's stream starts at (confirmed_flush_lsn): WAL
	// before it is gone for this slot; "" when unknown.
	ConfirmedFlush string `json:"confirmed_flush_lsn,omitempty"`
	// RestartLSN is the oldest WAL the slot keeps (restart_lsn).
	RestartLSN string `json:"restart_lsn,omitempty"`
	// RetainedBytes is the WAL the slot keeps: pg_current_wal_lsn() - restart_lsn; nil when it
	// cannot be measured (no slot, no restart_lsn, a standby).
	RetainedBytes *int64 `json:"retained_bytes,omitempty"`
	// WALStatus is pg_replication_slots.wal_status: reserved, extended, unreserved or lost (lost:
	// WAL the slot needs was removed, max_slot_wal_keep_size; the slot cannot be read any more).
	WALStatus string `json:"wal_status,omitempty"`
	// WALEnd is the server's current WAL position (pg_current_wal_lsn()): no position past it
	// exists yet; "" on a standby.
	WALEnd string `json:"wal_end,omitempty"`
}

// Confirmed returns the slot's confirmed position as a Position (the zero Position when
// unknown).
func (s SlotState) Confirmed() (Position, bool) {
	if s.ConfirmedFlush == "" {
		return Position{}, false
	}
	p, err := ParsePosition(s.ConfirmedFlush)
	return p, err == nil
}

// SlotStatus reads a replication slot's state; a slot that does not exist is SlotState{Exists:
// false}, not an error. It only reads.
func SlotStatus(ctx context.Context, db *sql.DB, slot string) (SlotState, error) {
	st := SlotState{Name: slot}
	const q = `SELECT slot_type::text, COALESCE(plugin::text, ''), COALESCE(database::text, ''), COALESCE(database = current_database(), false),
  active, COALESCE(confirmed_flush_lsn::text, ''), COALESCE(restart_lsn::text, ''),
  CASE WHEN restart_lsn IS NULL OR pg_is_in_recovery() THEN NULL ELSE (pg_current_wal_lsn() - restart_lsn)::int8 END,
  COALESCE(wal_status, ''), CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_current_wal_lsn()::text END
FROM pg_replication_slots WHERE slot_name = $1`
	var retained sql.NullInt64
	err := db.QueryRowContext(ctx, q, slot).Scan(&st.Type, &st.Plugin, &st.Database, &st.Here, &st.Active,
		&st.ConfirmedFlush, &st.RestartLSN, &retained, &st.WALStatus, &st.WALEnd)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("source: reading replication slot %q: %w", slot, err)
	}
	st.Exists = true
	if retained.Valid {
		st.RetainedBytes = &retained.Int64
	}
	return st, nil
}

// PublicationState is what PostgreSQL says of a publication (pg_publication).
type PublicationState struct {
	Name      string   `json:"name"`
	Exists    bool     `json:"exists"`
	AllTables bool     `json:"all_tables,omitempty"` // FOR ALL TABLES
	Covers    bool     `json:"covers"`               // it publishes the poller's table
	Publishes []string `json:"publishes,omitempty"`  // of insert, update, delete, truncate
	Tables    int      `json:"tables"`               // tables it publishes (when not FOR ALL TABLES)
}

// allOps reports whether it publishes every operation the logical cursor needs.
func (p PublicationState) allOps() bool { return len(p.Publishes) == 4 }

// CDCInfo is what the database says about a logical poller's set-up, read without writing
// anything: the server, the role and its privileges, the table and its replica identity, the
// slot and the publication.
type CDCInfo struct {
	WALLevel    string `json:"wal_level"`
	Database    string `json:"database"`
	User        string `json:"user"`
	Superuser   bool   `json:"superuser"`
	Replication bool   `json:"replication"` // the role has the REPLICATION attribute
	// CreateOnDatabase: the role has CREATE on the database (CREATE PUBLICATION needs it).
	CreateOnDatabase bool   `json:"create_on_database"`
	TableExists      bool   `json:"table_exists"`
	TableName        string `json:"table"` // schema-qualified, as PostgreSQL resolved it
	// OwnsTable: the role owns the table or is a member of its owner (adding the table to a
	// publication needs it).
	OwnsTable bool   `json:"owns_table"`
	CanSelect bool   `json:"can_select"`
	Owner     string `json:"owner,omitempty"`
	// ReplicaIdentity is default, full, index or nothing; IdentityColumns are the columns a
	// delete carries under default (the primary key) or index.
	ReplicaIdentity string   `json:"replica_identity,omitempty"`
	IdentityColumns []string `json:"identity_columns,omitempty"`

	Slot        SlotState        `json:"slot"`
	Publication PublicationState `json:"publication"`

	// ServerVersion is server_version_num (150004 for 15.4); Columns are the table's, in order.
	ServerVersion int      `json:"server_version"`
	Columns       []string `json:"-"`
	// Published is how the publication publishes the table now, Want how the poller needs it
	// (pubfilter.go); FilterErr is PostgreSQL's error reading the poller's filter, and Refused
	// what PostgreSQL refused of Want when the plan tried it in a transaction rolled back.
	Published pubTable `json:"published"`
	Want      pubTable `json:"want"`
	FilterErr string   `json:"filter_error,omitempty"`
	Refused   string   `json:"refused,omitempty"`

	// More are the same of the poller's more tables (Definition.More), in order: their table's
	// fields, and their publication's Covers, Published and Want, are theirs.
	More []CDCInfo `json:"more_tables,omitempty"`
}

// alter says whether the publication publishes the table otherwise than the poller needs.
func (i CDCInfo) alter() bool {
	return i.Publication.Exists && i.Publication.Covers && !i.Publication.AllTables && i.ServerVersion >= filtersSince && !i.Published.covers(i.Want)
}

// IdentityMeaning says what the table's REPLICA IDENTITY means for the poller's deletes.
func (i CDCInfo) IdentityMeaning() string {
	switch i.ReplicaIdentity {
	case "default":
		if len(i.IdentityColumns) == 0 {
			return "REPLICA IDENTITY DEFAULT without a primary key: updates and deletes carry no key, which the poller cannot use: add a primary key, or ALTER TABLE ... REPLICA IDENTITY FULL"
		}
		return fmt.Sprintf("REPLICA IDENTITY DEFAULT: a delete carries only the primary key (%s), not the old row, and updates carry no before image; ALTER TABLE ... REPLICA IDENTITY FULL makes updates and deletes carry the row before them (and unchanged TOAST values), at the cost of more WAL (pollerctl check offers it)", strings.Join(i.IdentityColumns, ", "))
	case "index":
		return fmt.Sprintf("REPLICA IDENTITY USING INDEX: a delete carries only the index's columns (%s), not the old row", strings.Join(i.IdentityColumns, ", "))
	case "full":
		return "REPLICA IDENTITY FULL: updates and deletes carry the row before them, an update every column"
	case "nothing":
		return "REPLICA IDENTITY NOTHING: updates and deletes carry no key at all; refused (ALTER TABLE ... REPLICA IDENTITY DEFAULT, with a primary key, or FULL)"
	}
	return "unknown replica identity " + i.ReplicaIdentity
}

// CDC is a connection to a logical poller's database for setting up (and tearing down) its slot
// and publication. It needs no slot to exist, unlike Open.
type CDC struct {
	poller   string
	db       *sql.DB
	def      source.Definition
	table    string // quoted
	describe string
	parts    []*CDC // the poller's more tables (Definition.More), each alone, on db
	multi    bool   // one of the tables of a poller of several
}

// OpenCDC connects to the database of a logical poller (cfg as for Open with the drivers ds: the
// definition must be valid, with its Slot and Publication, and its cursor kind logical on
// postgres). It checks nothing of the table: Inspect does.
func OpenCDC(ctx context.Context, ds source.Drivers, cfg source.Config) (*CDC, error) {
	d := cfg.Definition
	if d.Cursor.Kind != state.KindLogical {
		return nil, fmt.Errorf("source: poller %q: %w: its cursor kind is %s; a slot and a publication are for logical pollers only (cursor kind logical, PostgreSQL)",
			cfg.Poller, ErrCDCSetup, d.Cursor.Kind)
	}
	cfg.MaxOpenConns = 1
	db, describe, err := source.Connect(ctx, ds, cfg)
	if err != nil {
		return nil, err
	}
	c := &CDC{poller: cfg.Poller, db: db, def: d, table: source.QuoteTable(Driver{}, d.Table), describe: describe}
	for _, t := range d.More {
		c.parts = append(c.parts, &CDC{poller: cfg.Poller, db: db, def: d.Part(t), table: source.QuoteTable(Driver{}, t.Table), describe: describe, multi: true})
	}
	c.multi = len(c.parts) > 0
	return c, nil
}

// Close closes the connection.
func (c *CDC) Close() error { return c.db.Close() }

// DB returns the connection pool (one connection).
func (c *CDC) DB() *sql.DB { return c.db }

// String describes the database and table without secrets.
func (c *CDC) String() string { return c.describe }

// Slot is the replication slot's name the poller's settings give.
func (c *CDC) Slot() string { return c.def.Slot }

// Publication is the publication's name the poller's settings give.
func (c *CDC) Publication() string { return c.def.Publication }

// Table is the table, quoted as in the SQL.
func (c *CDC) Table() string { return c.table }

// CreatePublicationSQL is the statement Enable runs to create the publication: of the table as
// the poller needs it (CDCInfo.Want: its row filter and column list).
func (c *CDC) CreatePublicationSQL(info CDCInfo) string {
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
func (c *CDC) tables(info CDCInfo) ([]*CDC, []CDCInfo) {
	return append([]*CDC{c}, c.parts...), append([]CDCInfo{info}, info.More...)
}

// specs are the poller's tables as the publication's table list names them (tableSpec).
func (c *CDC) specs(info CDCInfo) string {
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
func (c *CDC) AlterPublicationSQL(info CDCInfo) string {
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

// CreateSlotSQL is the statement Enable runs to create the slot ($1: the slot's name).
const CreateSlotSQL = "SELECT pg_create_logical_replication_slot($1, 'pgoutput')"

// DropSlotSQL is the statement Disable runs to drop the slot ($1: the slot's name).
const DropSlotSQL = "SELECT pg_drop_replication_slot($1)"

// DropPublicationSQL is the statement Disable runs to drop the publication.
func (c *CDC) DropPublicationSQL() string { return "DROP PUBLICATION " + pgIdent(c.def.Publication) }

func pgIdent(s string) string { return Driver{}.Quote(s) }

// Inspect reads the set-up (CDCInfo) in one query; it writes nothing.
func (c *CDC) Inspect(ctx context.Context) (CDCInfo, error) {
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
LEFT JOIN pg_class cl ON cl.oid = to_regclass($2)
LEFT JOIN pg_namespace n ON n.oid = cl.relnamespace
LEFT JOIN pg_publication p ON p.pubname = $1
WHERE r.rolname = current_user`
	var (
		info                       CDCInfo
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
func (c *CDC) inspectFilters(ctx context.Context, info *CDCInfo, oid int64) error {
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

// Needs lists the privileges the set-up needs, each with whether the role has it: the slot
// needs REPLICATION (or superuser); the publication CREATE on the database and ownership of the
// table (or superuser); reading needs SELECT on the table and REPLICATION. The table's own are
// the last two.
func (i CDCInfo) Needs() []Need {
	su := " (or superuser)"
	return []Need{
		{"REPLICATION attribute" + su, "to create, read and drop the slot", i.Superuser || i.Replication,
			"ALTER ROLE " + pgIdent(i.User) + " WITH REPLICATION (as a superuser; on Azure Flexible Server as the admin, which may grant it)"},
		{"CREATE on database " + i.Database + su, "to create the publication", i.Superuser || i.CreateOnDatabase,
			"GRANT CREATE ON DATABASE " + pgIdent(i.Database) + " TO " + pgIdent(i.User)},
		{"ownership of table " + i.TableName + " (owner: " + i.Owner + ")" + su, "to add the table to the publication, and to drop the publication", i.Superuser || i.OwnsTable,
			"run pollerctl cdc as the table's owner, " + pgIdent(i.Owner) + ", or as a superuser (granting the owner's role to the poller's role would give it all the owner may do)"},
		{"SELECT on table " + i.TableName, "to read the table's columns", i.Superuser || i.CanSelect,
			"GRANT SELECT ON " + i.TableName + " TO " + pgIdent(i.User)},
	}
}

// Need is one privilege the set-up needs.
type Need struct {
	What, For string
	Has       bool
	Fix       string
}

// EnablePlan is what Enable would do, from Inspect's CDCInfo: the statements, and the problems
// that refuse it (nothing is created when there is any).
type EnablePlan struct {
	Info     CDCInfo
	Steps    []string // the SQL it runs, in order; none when everything exists
	Problems []string // each names the fix
}

// PlanEnable decides what Enable does, without writing: create the publication when missing,
// then the slot when missing; refuse when the server, the role, the table or an existing slot or
// publication of those names does not fit.
func (c *CDC) PlanEnable(info CDCInfo) EnablePlan {
	p := EnablePlan{Info: info}
	bad := func(format string, args ...any) { p.Problems = append(p.Problems, fmt.Sprintf(format, args...)) }
	if info.WALLevel != "logical" {
		bad("the server's wal_level is %q; logical decoding needs wal_level = logical (ALTER SYSTEM SET wal_level = logical and restart; on Azure Database for PostgreSQL Flexible Server set the server parameter wal_level to LOGICAL and restart)", info.WALLevel)
	}
	if len(c.parts) > 0 {
		return c.planTables(p)
	}
	if !c.tableProblems(info, bad) {
		return p
	}
	pub := info.Publication
	switch {
	case !pub.Exists:
		p.Steps = append(p.Steps, c.CreatePublicationSQL(info))
		if !info.Superuser && !info.CreateOnDatabase {
			bad("creating publication %q needs CREATE on database %s: GRANT CREATE ON DATABASE %s TO %s", pub.Name, info.Database, pgIdent(info.Database), pgIdent(info.User))
		}
		if !info.Superuser && !info.OwnsTable {
			bad("adding table %s to publication %q needs its ownership (owner: %s): run pollerctl cdc as %s or as a superuser", info.TableName, pub.Name, info.Owner, pgIdent(info.Owner))
		}
	case !pub.Covers:
		bad("publication %q exists but does not publish table %s: ALTER PUBLICATION %s ADD TABLE %s, or set {P}_CDC_PUBLICATION to another name", pub.Name, info.TableName, pgIdent(pub.Name), info.TableName)
	case !pub.allOps():
		bad("publication %q publishes only %s; a delete or truncate it leaves out would be lost silently: ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')",
			pub.Name, strings.Join(pub.Publishes, ", "), pgIdent(pub.Name))
	case info.alter():
		p.Steps = append(p.Steps, c.AlterPublicationSQL(info))
	}
	c.planSlot(&p, bad)
	return p
}

// planTables is PlanEnable of a poller of several tables (one publication of them all, one
// slot), after the server's checks: each table's problems, then the publication made or changed
// to publish every table as the poller needs (a table missing from it is added, which a table
// added to the poller needs), then the slot.
func (c *CDC) planTables(p EnablePlan) EnablePlan {
	info := p.Info
	bad := func(format string, args ...any) { p.Problems = append(p.Problems, fmt.Sprintf(format, args...)) }
	all, infos := c.tables(info)
	exist := true
	for i, t := range all {
		exist = t.tableProblems(infos[i], bad) && exist
	}
	if !exist {
		return p
	}
	pub := info.Publication
	owns := func() { // making or changing the publication of the tables needs each one's ownership
		for _, ti := range infos {
			if !ti.Superuser && !ti.OwnsTable {
				bad("publishing table %s in publication %q needs its ownership (owner: %s): run pollerctl cdc as %s or as a superuser", ti.TableName, pub.Name, ti.Owner, pgIdent(ti.Owner))
			}
		}
	}
	switch {
	case !pub.Exists:
		p.Steps = append(p.Steps, c.CreatePublicationSQL(info))
		if !info.Superuser && !info.CreateOnDatabase {
			bad("creating publication %q needs CREATE on database %s: GRANT CREATE ON DATABASE %s TO %s", pub.Name, info.Database, pgIdent(info.Database), pgIdent(info.User))
		}
		owns()
	case !pub.allOps():
		bad("publication %q publishes only %s; a delete or truncate it leaves out would be lost silently: ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')",
			pub.Name, strings.Join(pub.Publishes, ", "), pgIdent(pub.Name))
	default:
		if q := c.AlterPublicationSQL(info); q != "" {
			p.Steps = append(p.Steps, q)
			owns()
		}
	}
	c.planSlot(&p, bad)
	return p
}

// tableProblems adds, through bad, what keeps table c's changes from being read as the poller
// needs (its replica identity, its filter), and says whether the table exists.
func (c *CDC) tableProblems(info CDCInfo, bad func(format string, args ...any)) bool {
	if !info.TableExists {
		bad("table %s does not exist (or the role cannot see it)", c.def.Table)
		return false
	}
	switch {
	case info.ReplicaIdentity == "nothing":
		bad("table %s has REPLICA IDENTITY NOTHING: its updates and deletes carry no key: ALTER TABLE %s REPLICA IDENTITY DEFAULT (with a primary key) or FULL", info.TableName, info.TableName)
	case info.ReplicaIdentity != "full" && len(info.IdentityColumns) == 0:
		bad("table %s has no primary key, so its deletes carry no key: add one, or ALTER TABLE %s REPLICA IDENTITY FULL", info.TableName, info.TableName)
	case info.ReplicaIdentity != "full" && !slices.Equal(sortedStrings(info.IdentityColumns), sortedStrings(c.def.PK)):
		bad("the poller's key (%s) is not what a delete of %s carries (%s): make the poller's key %s, or ALTER TABLE %s REPLICA IDENTITY FULL",
			strings.Join(c.def.PK, ", "), info.TableName, strings.Join(info.IdentityColumns, ", "), strings.Join(info.IdentityColumns, ", "), info.TableName)
	}
	switch {
	case filterTooOld(c.def, info.ServerVersion) != "":
		bad("%s", filterTooOld(c.def, info.ServerVersion))
	case info.FilterErr != "":
		bad("PostgreSQL cannot read the poller's filter: %s: correct the filter (source.filter in poller.json, poller.WithFilter in Go)", info.FilterErr)
	case info.Refused != "":
		bad("PostgreSQL refuses to publish table %s as the poller needs it (%s): %s; with such a publication every UPDATE or DELETE of the table would fail. A row filter of a publication of updates and deletes may use only the replica identity's columns (%s), and a column list must hold them (every column under REPLICA IDENTITY FULL): filter on those columns, or ALTER TABLE %s REPLICA IDENTITY FULL, at a cost in WAL (pollerctl check shows it)",
			info.TableName, info.Want, info.Refused, strings.Join(info.IdentityColumns, ", "), info.TableName)
	}
	return true
}

// planSlot adds the slot's step to p, or its problems through bad.
func (c *CDC) planSlot(p *EnablePlan, bad func(format string, args ...any)) {
	info := p.Info
	slot := info.Slot
	switch {
	case !slot.Exists:
		p.Steps = append(p.Steps, strings.Replace(CreateSlotSQL, "$1", "'"+slot.Name+"'", 1))
		if !info.Superuser && !info.Replication {
			bad("creating replication slot %q needs the REPLICATION attribute: ALTER ROLE %s WITH REPLICATION (as a superuser, or on Azure Flexible Server as the admin)", slot.Name, pgIdent(info.User))
		}
	case slot.Type != "logical" || slot.Plugin != "pgoutput":
		bad("replication slot %q exists but is a %s slot with plugin %q, not a logical slot with pgoutput: set {P}_CDC_SLOT to another name (or drop that slot if nothing uses it)", slot.Name, slot.Type, slot.Plugin)
	case !slot.Here:
		bad("replication slot %q exists but decodes database %q, not %q: set {P}_CDC_SLOT to another name", slot.Name, slot.Database, info.Database)
	case slot.WALStatus == "lost":
		bad("replication slot %q has lost WAL it needs (wal_status lost, max_slot_wal_keep_size): it cannot be read; drop it (pollerctl cdc disable) and enable again, then reset the poller", slot.Name)
	}
}

func sortedStrings(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// Enabled is what Enable did.
type Enabled struct {
	CreatedPublication bool
	AlteredPublication bool // it publishes the table as the poller needs now (filter, columns)
	CreatedSlot        bool
	Slot               SlotState // the slot afterwards
}

// Enable creates the publication (when missing), then the slot (when missing), after PlanEnable
// finds no problem; an existing slot and publication that fit are kept. The publication is made
// first: a slot without it could not be read, and a slot is what costs disk. When the slot cannot
// be made after the publication was, the error says so, and what exists: running Enable again
// reuses the publication.
func (c *CDC) Enable(ctx context.Context) (Enabled, error) {
	var done Enabled
	info, err := c.Inspect(ctx)
	if err != nil {
		return done, err
	}
	plan := c.PlanEnable(info)
	if len(plan.Problems) > 0 {
		return done, fmt.Errorf("source: poller %q: %w: %s; nothing was created", c.poller, ErrCDCSetup, strings.Join(plan.Problems, "; "))
	}
	if !info.Publication.Exists {
		if _, err := c.db.ExecContext(ctx, c.CreatePublicationSQL(info)); err != nil {
			return done, fmt.Errorf("source: poller %q: %w: creating publication %q: %v; nothing was created", c.poller, ErrCDCSetup, c.def.Publication, err)
		}
		done.CreatedPublication = true
	}
	if q := c.AlterPublicationSQL(info); q != "" {
		if _, err := c.db.ExecContext(ctx, q); err != nil {
			return done, fmt.Errorf("source: poller %q: %w: changing how publication %q publishes the table (%s): %v; nothing was changed", c.poller, ErrCDCSetup, c.def.Publication, q, err)
		}
		done.AlteredPublication = true
	}
	if !info.Slot.Exists {
		if _, err := c.db.ExecContext(ctx, CreateSlotSQL, c.def.Slot); err != nil {
			what := fmt.Sprintf("publication %q existed before", c.def.Publication)
			if done.CreatedPublication {
				what = fmt.Sprintf("publication %q was created and is kept (running `cdc enable` again reuses it; `cdc disable` drops it)", c.def.Publication)
			}
			return done, fmt.Errorf("source: poller %q: %w: creating replication slot %q: %v; the slot does not exist; %s", c.poller, ErrCDCSetup, c.def.Slot, err, what)
		}
		done.CreatedSlot = true
	}
	if done.Slot, err = SlotStatus(ctx, c.db, c.def.Slot); err != nil {
		return done, fmt.Errorf("source: poller %q: %w", c.poller, err)
	}
	return done, nil
}

// DisablePlan is what Disable would do: the statements, and what it leaves alone and why.
type DisablePlan struct {
	Info  CDCInfo
	Steps []string
	// Keep says why the publication is kept (it publishes other tables too, or it is FOR ALL
	// TABLES: other readers may use it); "" when it is dropped or absent.
	Keep     string
	Problems []string
}

// PlanDisable decides what Disable does, without writing: drop the slot (when it exists and is
// the poller's kind of slot), then the publication (when it exists and publishes only the
// poller's table).
func (c *CDC) PlanDisable(info CDCInfo) DisablePlan {
	p := DisablePlan{Info: info}
	bad := func(format string, args ...any) { p.Problems = append(p.Problems, fmt.Sprintf(format, args...)) }
	slot := info.Slot
	switch {
	case !slot.Exists:
	case slot.Type != "logical" || slot.Plugin != "pgoutput" || !slot.Here:
		bad("replication slot %q is not this poller's kind of slot (a %s slot, plugin %q, database %q): not dropped; if nothing uses it, drop it by hand: SELECT pg_drop_replication_slot('%s')",
			slot.Name, slot.Type, slot.Plugin, slot.Database, slot.Name)
	case slot.Active:
		bad("replication slot %q is being read right now (active): run again when the tick is over", slot.Name)
	default:
		p.Steps = append(p.Steps, strings.Replace(DropSlotSQL, "$1", "'"+slot.Name+"'", 1))
		if !info.Superuser && !info.Replication {
			bad("dropping replication slot %q needs the REPLICATION attribute: ALTER ROLE %s WITH REPLICATION", slot.Name, pgIdent(info.User))
		}
	}
	pub := info.Publication
	mine := 0 // the poller's tables it publishes
	for _, ti := range append([]CDCInfo{info}, info.More...) {
		if ti.Publication.Covers {
			mine++
		}
	}
	switch {
	case !pub.Exists:
	case pub.AllTables || pub.Tables > mine:
		what := fmt.Sprintf("%d tables", pub.Tables)
		if pub.AllTables {
			what = "FOR ALL TABLES"
		}
		p.Keep = fmt.Sprintf("publication %q publishes other tables too (%s): kept, as other readers may use it; to take only this table out: ALTER PUBLICATION %s DROP TABLE %s",
			pub.Name, what, pgIdent(pub.Name), info.TableName)
	default:
		p.Steps = append(p.Steps, c.DropPublicationSQL())
		if !info.Superuser && !info.OwnsTable {
			bad("dropping publication %q needs ownership of it (the role that created it) or superuser", pub.Name)
		}
	}
	return p
}

// Disabled is what Disable did.
type Disabled struct {
	DroppedSlot        bool
	DroppedPublication bool
}

// Disable drops the slot (first: it is what keeps WAL) and then the publication, as PlanDisable
// decides, after it finds no problem.
func (c *CDC) Disable(ctx context.Context) (Disabled, error) {
	var done Disabled
	info, err := c.Inspect(ctx)
	if err != nil {
		return done, err
	}
	plan := c.PlanDisable(info)
	if len(plan.Problems) > 0 {
		return done, fmt.Errorf("source: poller %q: %w: %s; nothing was dropped", c.poller, ErrCDCSetup, strings.Join(plan.Problems, "; "))
	}
	if info.Slot.Exists {
		if _, err := c.db.ExecContext(ctx, DropSlotSQL, c.def.Slot); err != nil {
			return done, fmt.Errorf("source: poller %q: %w: dropping replication slot %q: %v; nothing was dropped", c.poller, ErrCDCSetup, c.def.Slot, err)
		}
		done.DroppedSlot = true
	}
	if slices.Contains(plan.Steps, c.DropPublicationSQL()) {
		if _, err := c.db.ExecContext(ctx, c.DropPublicationSQL()); err != nil {
			what := "nothing was dropped"
			if done.DroppedSlot {
				what = fmt.Sprintf("the slot %q was dropped; the publication is left (drop it by hand: %s)", c.def.Slot, c.DropPublicationSQL())
			}
			return done, fmt.Errorf("source: poller %q: %w: dropping publication %q: %v; %s", c.poller, ErrCDCSetup, c.def.Publication, err, what)
		}
		done.DroppedPublication = true
	}
	return done, nil
}

// Restart says where a logical poller starts again when its state is deleted: where its
// replication slot is, which a delete leaves behind.
func (Driver) Restart(kind, poller string) string {
	if kind != state.KindLogical {
		return ""
	}
	return fmt.Sprintf("WARNING: %s is in this build: its next tick starts where its replication slot is, and delivers again the changes the slot still holds.\n"+
		"Its slot and publication are not dropped by a delete and keep WAL while nothing reads them: to remove the poller, run `pollerctl cdc disable %s --yes` first.\n", poller, poller)
}

// CheckDefinition checks PostgreSQL's rules of a definition: a logical cursor's slot and
// publication names (CheckSlotName), each broken one a *source.FieldError (both joined when both
// are). The names come from the poller's settings, not its declaration.
func (Driver) CheckDefinition(d source.Definition) error {
	if d.Cursor.Kind != state.KindLogical {
		return nil
	}
	var errs []error
	if err := CheckSlotName("slot", d.Slot); err != nil {
		errs = append(errs, &source.FieldError{Field: source.FieldSlot, Err: err})
	}
	if err := CheckSlotName("publication", d.Publication); err != nil {
		errs = append(errs, &source.FieldError{Field: source.FieldPublication, Err: err})
	}
	return errors.Join(errs...)
}

// CheckSlotName (what: "slot" or "publication") accepts what PostgreSQL accepts as a replication slot name (lower-case letters,
// digits and '_', at most 63), which this package also asks of publication names so that both
// can be written into SQL without quoting surprises.
func CheckSlotName(what, name string) error {
	if name == "" {
		return fmt.Errorf("no %s name", what)
	}
	if len(name) > 63 {
		return fmt.Errorf("%s name %q is longer than 63 bytes", what, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("%s name %q may hold only lower-case letters, digits and '_'", what, name)
		}
	}
	return nil
}
