package source

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

var (
	// ErrConnect: the database could not be reached or refused the credentials.
	ErrConnect = errors.New("cannot connect to the source database")
	// ErrSchema: the table or a column is missing, or a column's type cannot serve as declared.
	ErrSchema = errors.New("source schema does not fit the definition")
	// ErrNullCursor: the cursor or a key column holds NULL, which a keyset read would skip forever.
	ErrNullCursor = errors.New("NULL in a cursor or key column")
	// ErrCursor: a stored cursor does not fit this source (kind or key columns differ).
	ErrCursor = errors.New("cursor does not fit the source")
	// ErrColumnsChanged: the table has gained a column since the source opened, and the source
	// reads every column (AllColumns): the rows from that change on need a source opened anew,
	// which the tick opens (the changes before it are delivered).
	ErrColumnsChanged = errors.New("the table's columns changed since the source opened")
	// ErrMisconfigured: what a retry cannot cure: the database's set-up for the cursor, or the
	// checkpoint, needs a change (the error says which). A driver's own errors of that kind
	// match it (Mark).
	ErrMisconfigured = errors.New("the source needs a change")
)

// Mark returns err such that errors.Is also finds each of kinds in it, its text unchanged: how
// a driver's own error says to the portable code what kind of error it is (PostgreSQL's
// ErrSlotAhead is ErrStreamAhead and ErrMisconfigured).
func Mark(err error, kinds ...error) error { return &marked{err, kinds} }

type marked struct {
	err   error
	kinds []error
}

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return append([]error{m.err}, m.kinds...) }

// Config opens a source.
type Config struct {
	Poller     string
	Driver     string // the name of the driver (Driver.Name)
	DSN        string
	Definition sourcedef.Definition
	// MaxOpenConns bounds the connection pool; default 4. Not with Pools.
	MaxOpenConns int
	// Pools, when set, gives the source the pool it shares with the process's other sources on
	// the same database (same driver and DSN), of Pools.Size connections, instead of its own.
	Pools *Pools
}

// Source reads a table in keyset order. It is safe for concurrent use.
type Source struct {
	shape       *row.Shape // what the source's rows share: its table, its columns and its key (lay)
	poller      string
	dl          driver.Driver
	def         sourcedef.Definition
	db          *sql.DB
	close       func() error // Close: closes db, or gives it back to Config.Pools
	fingerprint string
	identity    state.SourceDef
	describe    string
	label       string                     // "table T", or "tables T, U, ..." for a poller of several, in errors
	parts       []*Source                  // the poller's more tables (Definition.More), each laid out alone, sharing db
	part        bool                       // s is one of them: rows and layout only, no reader of its own
	all         bool                       // def.Columns was AllColumns: they are the table's as check found them
	q           queries                    // the keyset queries, and the stamp check (keyset kinds only)
	cq          cleanupQueries             // the cleanup's (Definition.Cleanup; keyset kinds only)
	ageType     string                     // the database type of the cleanup's time column, when the rows do not carry it
	flavor      row.TSFlavor               // how a timestamp cursor compares with the database's clock
	reader      reader                     // reads the rows: keyset, or the driver's change stream
	bound       driver.ReadBound           // a keyset read's bound below the transactions still open, if the driver keeps one
	dupCheck    bool                       // the catalog cannot confirm the key is unique: each fetch checks its rows (keys.go)
	dupWhy      string                     // why it cannot, for the error
	repeat      atomic.Pointer[repeatSeen] // the repeat the last checked fetch found (dupCheck only)
	setup       setupCache                 // the setup check's findings (SetupProblems)

	// sel and keySel are the select lists of a row's columns and of its key columns, as the
	// driver reads them (selectCols), made once when the source is laid out.
	sel, keySel string
}

// A reader reads a source's rows: in keyset order (keyset) or through the driver's change
// stream (streamReader).
type reader interface {
	fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error)
	waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error)
	// oldest reads the first row that waits after the cursor.
	oldest(ctx context.Context, after *state.Cursor) (*row.Batch, error)
	// refresh reads what Stats reports of the reads but that they do not read each time.
	refresh(ctx context.Context) error
	checkCursor(c *state.Cursor) error
	committed(ctx context.Context, c *state.Cursor) error
	stats() driver.Stats
}

// Open connects with the driver of ds that cfg.Driver names, checks the table against the
// definition, and prepares the queries (package drivers opens with every driver). Errors name
// the poller, the table and the column at fault; DSNs in them are redacted.
func Open(ctx context.Context, ds driver.Drivers, cfg Config) (*Source, error) {
	c, err := connect(ctx, ds, cfg)
	if err != nil {
		return nil, err
	}
	d := cfg.Definition.Resolved()
	s := &Source{
		poller:      cfg.Poller,
		dl:          c.dl,
		def:         d,
		db:          c.db,
		close:       c.close,
		identity:    Identify(cfg.Driver, c.loc, d),
		fingerprint: Fingerprint(cfg.Driver, c.loc, d),
		describe:    c.describe,
		shape:       newShape(cfg.Poller, d),
		label:       d.Label(),
	}
	if !d.Changes() {
		s.bound, _ = c.dl.ReadBound(cfg.DSN, d)
	}
	// The more tables first: the change stream's check, in the first table's, reads them all.
	for i, t := range d.More {
		p := s.newPart(t)
		if err := p.check(ctx); err != nil {
			c.close()
			return nil, err
		}
		s.identity.Tables[i].Columns = p.shape.Names
		s.parts = append(s.parts, p)
	}
	if err := s.check(ctx); err != nil {
		c.close()
		return nil, err
	}
	return s, nil
}

// newPart is the source of one more table t of s: laid out alone (its columns, key, rows), on
// s's connection, read through s's change stream.
func (s *Source) newPart(t sourcedef.TableDef) *Source {
	d := s.def.Part(t)
	return &Source{poller: s.poller, dl: s.dl, def: d, db: s.db, describe: s.describe, shape: newShape(s.poller, d), label: d.Label(), part: true}
}

// newShape is the shape of d's rows, before the source is laid out (lay).
func newShape(poller string, d sourcedef.Definition) *row.Shape {
	return &row.Shape{Poller: poller, Table: d.Table.String(), Kind: d.Cursor.Kind, PK: d.PK}
}

// partOf is the source of the poller's table named table ("" or the first table: s).
func (s *Source) partOf(table string) (*Source, error) {
	if table == "" || table == s.shape.Table {
		return s, nil
	}
	for _, p := range s.parts {
		if p.shape.Table == table {
			return p, nil
		}
	}
	return nil, fmt.Errorf("source: poller %q: %w: it reads no table %q (it reads %s)", s.poller, ErrCursor, table, s.def.TableNames())
}

// Connect validates cfg's definition, opens its connection pool with the driver of ds that
// cfg.Driver names (cfg.MaxOpenConns connections, default 4) and checks that the database
// answers; describe names the driver, server, database and table, without secrets. It checks
// nothing of the table: what a driver's administration of a set-up (Driver.OpenCDC) starts from.
// Errors name the poller; DSNs in them are redacted.
func Connect(ctx context.Context, ds driver.Drivers, cfg Config) (db *sql.DB, describe string, err error) {
	c, err := connect(ctx, ds, cfg)
	return c.db, c.describe, err
}

// OpenCDC connects to the database of a poller whose cursor kind has a set-up pollerctl cdc
// administers (Drivers.CDCAdmin), on one connection (cfg.MaxOpenConns and cfg.Pools are not
// used), and hands it to that driver (Driver.OpenCDC), which administers the set-up. Errors name
// the poller; DSNs in them are redacted.
func OpenCDC(ctx context.Context, ds driver.Drivers, cfg Config) (driver.CDCSetup, error) {
	admin, ok := ds.CDCAdmin(cfg.Definition.Cursor.Kind)
	if !ok {
		return nil, fmt.Errorf("source: poller %q: a %s cursor has no set-up to administer", cfg.Poller, cfg.Definition.Cursor.Kind)
	}
	cfg.MaxOpenConns, cfg.Pools = 1, nil
	c, err := connect(ctx, ds, cfg)
	if err != nil {
		return nil, err
	}
	cdc, err := admin.OpenCDC(ctx, driver.Conn{Poller: cfg.Poller, Definition: cfg.Definition, DB: c.db, Describe: c.describe})
	if err != nil {
		c.close()
		return nil, err
	}
	return cdc, nil
}

// conn is a connected source database: what Open and Connect start from.
type conn struct {
	db       *sql.DB
	close    func() error // closes db, or gives it back to Config.Pools
	dl       driver.Driver
	loc      driver.Location
	describe string // "driver server/database table T", without secrets
}

// connect validates cfg's definition, opens its connection pool (cfg.MaxOpenConns, default 4)
// and checks that the database answers. Errors name the poller; DSNs in them are redacted.
func connect(ctx context.Context, ds driver.Drivers, cfg Config) (conn, error) {
	d := cfg.Definition
	dl, err := validate(d, cfg.Poller, ds, cfg.Driver)
	if err != nil {
		return conn{}, err
	}
	loc, err := dl.Location(cfg.DSN)
	if err != nil {
		return conn{}, fmt.Errorf("source: poller %q: %w", cfg.Poller, err)
	}
	var (
		db    *sql.DB
		close func() error
	)
	if cfg.Pools != nil {
		db, close, err = cfg.Pools.acquire(dl, cfg.DSN)
	} else if db, err = dl.Open(cfg.DSN); err == nil {
		maxConns := cfg.MaxOpenConns
		if maxConns <= 0 {
			maxConns = 4
		}
		limit(db, maxConns)
		close = db.Close
	}
	if err != nil {
		return conn{}, fmt.Errorf("source: poller %q: %w: %s: %s", cfg.Poller, ErrConnect, redact.DSN(cfg.DSN), redactErr(err, cfg.DSN))
	}
	if err := db.PingContext(ctx); err != nil {
		close()
		return conn{}, fmt.Errorf("source: poller %q: %w (%s): %v", cfg.Poller, ErrConnect, redact.DSN(cfg.DSN), redactErr(err, cfg.DSN))
	}
	where := loc.Database // a file (SQLite) has no server
	if loc.Server != "" {
		where = loc.Server + "/" + loc.Database
	}
	return conn{db: db, close: close, dl: dl, loc: loc, describe: fmt.Sprintf("%s %s %s", cfg.Driver, where, d.Label())}, nil
}

// redactErr keeps a driver error from echoing the DSN's secrets.
func redactErr(err error, dsn string) string {
	msg := err.Error()
	if dsn != "" {
		msg = strings.ReplaceAll(msg, dsn, redact.DSN(dsn))
	}
	return redact.DSN(msg)
}

func (s *Source) schemaErr(column, format string, args ...any) error {
	where := fmt.Sprintf("source: poller %q, table %s", s.poller, s.def.Table)
	if column != "" {
		where += fmt.Sprintf(", column %q", column)
	}
	return fmt.Errorf("%s: %w: %s", where, ErrSchema, fmt.Sprintf(format, args...))
}

// columnTypes reads the types of table's columns cols (nil: all of them, whose names it returns)
// with a query that returns no rows: their DatabaseTypeName (SQLite: as declared), as the
// driver names them (Driver.ColumnTypes).
func columnTypes(ctx context.Context, db *sql.DB, dl driver.Driver, t sourcedef.Table, cols []string) ([]string, []string, error) {
	sel := "*"
	if cols != nil {
		sel = strings.Join(driver.QuoteAll(dl, cols), ", ")
	}
	rows, err := db.QueryContext(ctx, "SELECT "+sel+" FROM "+driver.QuoteTable(dl, t)+" WHERE 1=0")
	if err != nil {
		return nil, nil, fmt.Errorf("the columns cannot be read: %v", err)
	}
	cts, err := rows.ColumnTypes()
	rows.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("reading column types: %v", err)
	}
	types := make([]string, len(cts))
	names := make([]string, len(cts))
	for i, ct := range cts {
		types[i], names[i] = ct.DatabaseTypeName(), ct.Name()
	}
	if cols != nil {
		names = cols
	}
	if types, err = dl.ColumnTypes(ctx, db, t, names, types); err != nil {
		return nil, nil, fmt.Errorf("reading column types: %v", err)
	}
	return names, types, nil
}

// check reads the column types with a query that returns no rows, names what is missing, checks
// the cursor and key types, and that no cursor or key value is NULL.
func (s *Source) check(ctx context.Context) error {
	if s.def.ReadsMessages() {
		return s.checkMessages(ctx)
	}
	table := driver.QuoteTable(s.dl, s.def.Table)
	cols := s.def.Selected()
	// Name what is missing from the table's own column list (SQLite would read a double-quoted
	// name that matches no column as a string literal, so a failing query cannot be relied on).
	all, err := s.db.QueryContext(ctx, "SELECT * FROM "+table+" WHERE 1=0")
	if err != nil {
		return s.schemaErr("", "the table cannot be read: %v", err)
	}
	have, err := all.Columns()
	all.Close()
	if err != nil {
		return s.schemaErr("", "listing columns: %v", err)
	}
	if s.def.ReadsAllColumns() { // every column there is now; the stream tells of later ones
		s.all, s.def.Columns, cols = true, have, have
		s.identity.Columns = have
	}
	if err := s.checkOutboxColumns(have); err != nil {
		return err
	}
	for _, c := range cols {
		if !s.hasColumn(have, c) {
			return s.schemaErr(c, "no such column (the table has %s)", strings.Join(have, ", "))
		}
	}
	_, types, err := columnTypes(ctx, s.db, s.dl, s.def.Table, cols)
	if err != nil {
		return s.schemaErr("", "%v", err)
	}
	if s.ageType, err = s.ageColumnType(ctx, have); err != nil {
		return err
	}
	if err := s.lay(types); err != nil {
		return err
	}
	if err := s.checkOutboxTypes(); err != nil {
		return err
	}

	for _, k := range s.shape.KeyCols {
		var one int
		isNull := s.dl.IsNull(s.dl.Quote(k))
		err := s.db.QueryRowContext(ctx, s.dl.Limit("1", " FROM "+table+" WHERE "+isNull, "1")).Scan(&one)
		switch {
		case err == nil:
			return fmt.Errorf("source: poller %q, table %s, column %q: %w: rows with NULL there would never be read; make the column NOT NULL",
				s.poller, s.def.Table, k, ErrNullCursor)
		case !errors.Is(err, sql.ErrNoRows):
			return s.schemaErr(k, "checking for NULLs: %v", err)
		}
	}
	if s.part { // the first table's source checks the change stream, which reads it too
		return nil
	}
	if r, ok := s.reader.(streamReader); ok {
		return r.Check(ctx)
	}
	if err := s.checkKey(ctx); err != nil {
		return err
	}
	return s.CheckStamps(ctx)
}

// messageTypes are the database types of a messages outbox's columns (sourcedef.MessageColumns),
// as PostgreSQL's driver classes them (the one database whose logical cursor reads messages):
// text, but the payload and the headers, which are JSON.
var messageTypes = []string{"TEXT", "TEXT", "TEXT", "JSONB", "TEXT", "JSONB"}

// checkMessages lays out a messages outbox (sourcedef.Definition.ReadsMessages): no table to
// read, its columns fixed; then the change stream checks its set-up.
func (s *Source) checkMessages(ctx context.Context) error {
	if err := s.lay(messageTypes); err != nil {
		return err
	}
	r, ok := s.reader.(streamReader)
	if !ok {
		return fmt.Errorf("source: poller %q, %s: a messages outbox is read by a change stream, not a %s cursor", s.poller, s.label, s.def.Cursor.Kind)
	}
	return r.Check(ctx)
}

// lay lays the source out from its columns' database types (DatabaseTypeName, SQLite: as
// declared; in the order of the definition's columns, keys added): each column's class, the
// key's columns and codecs, checking that the cursor and key types fit, the keyset queries, and
// the reader.
func (s *Source) lay(types []string) error {
	cols := s.def.Selected()
	s.shape.Cols = make([]row.Column, len(types))
	for i, t := range types {
		s.shape.Cols[i] = row.NewColumn(s.dl, cols[i], t)
		if why, _ := s.dl.Refuse(s.shape.Cols[i].ColumnType); why != "" {
			return s.schemaErr(cols[i], "type %s: %s", t, why)
		}
	}
	s.shape.Names = cols
	s.sel = s.selectCols(cols)

	s.shape.KeyCols = s.def.KeyColumns()
	s.keySel = s.selectCols(s.shape.KeyCols)
	for i, k := range s.shape.KeyCols {
		idx := slices.Index(cols, k)
		c := &s.shape.Cols[idx]
		if i == 0 && s.def.Changes() {
			s.flavor = row.TSNone
		} else if i == 0 {
			if err := cursorTypeFits(s.def.Cursor.Kind, c.Class, c.Flavor); err != nil {
				return s.schemaErr(k, "type %s: %v", c.DBType, err)
			}
			s.flavor = c.Flavor
		}
		kc := *c
		if i > 0 && kc.Flavor == row.TSText {
			kc.Flavor = row.TSNone // a TEXT tiebreaker orders as text: only the cursor column holds times
		}
		codec, err := row.CodecFor(&kc)
		if err != nil {
			return s.schemaErr(k, "%v", err)
		}
		s.shape.KeyIdx = append(s.shape.KeyIdx, idx)
		s.shape.Codecs = append(s.shape.Codecs, codec)
	}
	if !s.def.Changes() {
		s.q = buildQueries(s.dl, s.def, s.sel, s.keySel, s.shape.Codecs, s.flavor, s.bound != nil)
		s.shape.StampFix = s.q.stampFix
		s.reader = &keyset{s}
		return s.layCleanup(s.ageType)
	}
	if s.part {
		return nil
	}
	stream, err := s.dl.ChangeStream(s.def.Cursor.Kind, &layout{s})
	if err != nil {
		if errors.Is(err, driver.ErrNotSupported) {
			return fmt.Errorf("source: poller %q: driver %s has no reader of %s cursors: %w", s.poller, s.dl.Name(), s.def.Cursor.Kind, driver.ErrNotSupported)
		}
		return fmt.Errorf("source: poller %q: opening the %s reader: %w", s.poller, s.def.Cursor.Kind, err)
	}
	s.reader = streamReader{stream}
	return nil
}

// Offline lays out a source of cfg with drv as Open does, from its columns' database types
// (DatabaseTypeName, by column name) instead of the database's answer, and runs nothing: no
// connection, no check of the table, the data or a change stream's set-up. It is for a driver's
// unit tests and golden SQL (Queries), without a server. With cfg.DSN, its reads go there (a
// test's stand-in for the server, which sees the SQL and the arguments the driver sends);
// Close closes that pool.
func Offline(drv driver.Driver, cfg Config, types map[string]string) (*Source, driver.Layout, error) {
	cfg.Definition = cfg.Definition.Resolved()
	if _, err := validate(cfg.Definition, cfg.Poller, driver.Drivers{drv}, cfg.Driver); err != nil {
		return nil, nil, err
	}
	s := &Source{poller: cfg.Poller, dl: drv, def: cfg.Definition, describe: drv.Name() + " (offline) " + cfg.Definition.Label(), shape: newShape(cfg.Poller, cfg.Definition), label: cfg.Definition.Label()}
	if cfg.DSN != "" {
		db, err := drv.Open(cfg.DSN)
		if err != nil {
			return nil, nil, err
		}
		s.db, s.close = db, db.Close
	}
	if !s.def.Changes() {
		s.bound, _ = drv.ReadBound(cfg.DSN, s.def)
	}
	if col := cleanupColumn(s.def); !slices.Contains(s.def.Selected(), col) {
		s.ageType = types[col]
	}
	layOffline := func(s *Source) error {
		var ordered []string
		for _, c := range s.def.Selected() {
			ordered = append(ordered, types[c])
		}
		return s.lay(ordered)
	}
	for _, t := range s.def.More {
		p := s.newPart(t)
		if err := layOffline(p); err != nil {
			return nil, nil, err
		}
		s.parts = append(s.parts, p)
	}
	if err := layOffline(s); err != nil {
		return nil, nil, err
	}
	return s, &layout{s}, nil
}

// cursorTypeFits says whether a column of class cl can carry a cursor of kind.
func cursorTypeFits(kind string, cl row.Class, fl row.TSFlavor) error {
	switch kind {
	case state.KindTimestampPK:
		if fl == row.TSUnsupported || (cl != row.ClassTime && fl != row.TSText) {
			return errors.New("a timestamp+pk cursor needs a timestamp column (timestamptz/timestamp, datetime2/datetimeoffset, or SQLite TEXT as YYYY-MM-DDTHH:MM:SS.ffffffZ)")
		}
	case state.KindInteger:
		if cl != row.ClassInt {
			return errors.New("an integer cursor needs an integer column")
		}
	case state.KindRowversion:
		if cl != row.ClassRowversion && cl != row.ClassBinary {
			return errors.New("a rowversion cursor needs a rowversion column")
		}
	case state.KindXID:
		if cl != row.ClassXID8 {
			return errors.New("an xid cursor needs an xid8 column (DEFAULT pg_current_xact_id())")
		}
	}
	return nil
}

// Fingerprint returns the source's fingerprint (see Fingerprint).
func (s *Source) Fingerprint() string { return s.fingerprint }

// Identity returns the canonical form of the source that state documents record (Identify).
func (s *Source) Identity() state.SourceDef { return s.identity }

// String describes the source without secrets.
func (s *Source) String() string { return s.describe }

// Queries are the SQL texts of a source's keyset reads, with placeholders: for people and for
// golden tests (Offline). Every read's texts are empty for a change stream.
type Queries struct {
	FetchFirst, FetchAfter string // from the beginning, and after a cursor
	// BacklogFirst and BacklogAfter read what waits: as the fetches, without the bounds on
	// transactions still open.
	BacklogFirst, BacklogAfter string
	// StampCheck finds a row the cursor can never reach (CheckStamps), with StampArg; "" when
	// the cursor has nothing to check.
	StampCheck string
	StampArg   any
	// Cleanup deletes delivered rows behind a checkpoint, a bounded number (Source.Cleanup), and
	// CleanupCount counts them (AwaitingCleanup); "" without a cleanup.
	Cleanup, CleanupCount string
}

// Queries returns the SQL texts of the source's keyset reads.
func (s *Source) Queries() Queries {
	return Queries{FetchFirst: s.q.FetchFirst, FetchAfter: s.q.FetchAfter, BacklogFirst: s.q.BacklogFirst, BacklogAfter: s.q.BacklogAfter,
		StampCheck: s.q.StampCheck, StampArg: s.q.stampArg, Cleanup: s.cq.Delete, CleanupCount: s.cq.Count}
}

// DB returns the connection pool.
func (s *Source) DB() *sql.DB { return s.db }

// Close closes the connection pool, or gives it back to the Pools it came from.
func (s *Source) Close() error {
	if s.close == nil { // Offline
		return nil
	}
	if f := s.Follower(); f != nil { // a stream held for a next tick that will not come
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = f.EndFollow(ctx) // its connection is closed regardless
		cancel()
	}
	return s.close()
}

// keyArgs turns a stored cursor into query arguments, checking it fits this source.
func (s *Source) keyArgs(after *state.Cursor) ([]any, error) {
	fail := func(format string, args ...any) ([]any, error) {
		return nil, fmt.Errorf("source: poller %q: %w: %s", s.poller, ErrCursor, fmt.Sprintf(format, args...))
	}
	if after.Kind != s.def.Cursor.Kind {
		return fail("the stored cursor is of kind %q, the source's is %q", after.Kind, s.def.Cursor.Kind)
	}
	if len(after.Tiebreaker) != len(s.shape.KeyCols)-1 {
		return fail("the stored cursor's tiebreaker has %d columns, the source's key has %d (%s)", len(after.Tiebreaker), len(s.shape.KeyCols)-1, strings.Join(s.shape.KeyCols[1:], ", "))
	}
	args := make([]any, len(s.shape.KeyCols))
	for i, k := range s.shape.KeyCols {
		raw := after.Value
		if i > 0 {
			var ok bool
			if raw, ok = after.Tiebreaker[k]; !ok {
				return fail("the stored cursor's tiebreaker lacks column %q", k)
			}
		}
		v, err := s.shape.Codecs[i].Decode(raw)
		if err != nil {
			return fail("column %q: value %s: %v", k, raw, err)
		}
		args[i] = v
	}
	return args, nil
}

// Waiting counts the rows waiting after the cursor (nil: the beginning), as Backlog defines
// them, up to limit: a read of at most limit rows, counted by the database.
func (s *Source) Waiting(ctx context.Context, after *state.Cursor, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("source: poller %q: count limit %d must be positive", s.poller, limit)
	}
	return s.reader.waiting(ctx, after, limit)
}

// Fetch returns up to limit rows after the cursor (nil: from the beginning), in keyset order
// (or the change stream's), within the safe upper bound.
func (s *Source) Fetch(ctx context.Context, after *state.Cursor, limit int) (*row.Batch, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("source: poller %q: batch size %d must be positive", s.poller, limit)
	}
	return s.reader.fetch(ctx, after, limit)
}

// Committed tells the source that the checkpoint c is durable in the state blob. A logical
// cursor advances its replication slot to c (never past it), so that PostgreSQL can recycle the
// WAL before it; the other kinds do nothing. The tick calls it after each successful commit; a
// holder whose commit was refused never calls it.
func (s *Source) Committed(ctx context.Context, c *state.Cursor) error {
	if c == nil {
		return nil
	}
	return s.reader.committed(ctx, c)
}

// CommitWanted says that committing the checkpoint now would spare the next fetch work: a
// change stream that re-reads from its own position until the checkpoint moves it (a logical
// cursor's slot) has no batch left in hand and its position is behind the cursor. The tick then
// commits before the next fetch rather than waiting for its checkpoint interval, so that a long
// catch-up reads its changes about once and holds a bounded window of them. Keyset kinds: false.
func (s *Source) CommitWanted() bool {
	if r, ok := s.reader.(streamReader); ok {
		return r.CommitWanted()
	}
	return false
}

// FetchKeyOf reads the row with the primary key of c (a row's cursor, as Row.Cursor gives it) as
// the row is now, whatever the checkpoint: a batch of that row, or an empty one when the row is
// gone or no longer matches the definition's filter. Dead letters are replayed with it.
func (s *Source) FetchKeyOf(ctx context.Context, c *state.Cursor) (*row.Batch, error) {
	args, err := s.keyArgs(c)
	if err != nil {
		return nil, err
	}
	var preds []string
	var pkArgs []any
	for _, pk := range s.def.PK {
		i := slices.Index(s.shape.KeyCols, pk)
		if i < 0 {
			return nil, fmt.Errorf("source: poller %q: primary key column %q is not in the cursor", s.poller, pk)
		}
		pkArgs = append(pkArgs, args[i])
		preds = append(preds, s.dl.Quote(pk)+" = "+s.dl.Placeholder(len(pkArgs)))
	}
	if f := strings.TrimSpace(s.def.Filter); f != "" {
		preds = append(preds, "("+f+")")
	}
	q := "SELECT " + s.sel + " FROM " + driver.QuoteTable(s.dl, s.def.Table) + " WHERE " + strings.Join(preds, " AND ")
	rows, err := s.db.QueryContext(ctx, q, pkArgs...)
	if err != nil {
		return nil, fmt.Errorf("source: poller %q, table %s: reading a row by key: %w", s.poller, s.def.Table, err)
	}
	return s.scan(rows, nil, 1)
}

// scan reads a query's rows into a batch; limit sizes its first allocation.
func (s *Source) scan(rows *sql.Rows, after *state.Cursor, limit int) (*row.Batch, error) {
	defer rows.Close()
	b := s.shape.Batch(after, min(limit, 1024))
	n := len(s.shape.Cols)
	ptrs := make([]any, n)
	caps := make([]capture, n)
	var block []any  // one allocation for many rows' values
	var texts []byte // and one for many of their bytes
	for i := range caps {
		caps[i].bytes = &texts
		ptrs[i] = &caps[i]
	}
	for rows.Next() {
		if len(block) < n {
			block = make([]any, n*min(limit, 256))
		}
		vals := block[:n:n]
		block = block[n:]
		for i := range vals {
			caps[i].dst = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("source: poller %q, table %s: fetch: %w", s.poller, s.def.Table, err)
		}
		// Values stay as the driver returned them; Row normalizes each one when it is read, so
		// a handler pays only for the conversions it uses.
		r := s.shape.Row(vals, nil)
		if err := s.checkKeys(r); err != nil {
			return nil, err
		}
		if err := s.checkTextStamp(r, vals[s.shape.KeyIdx[0]]); err != nil {
			return nil, err
		}
		b.Rows = append(b.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("source: poller %q, table %s: fetch: %w", s.poller, s.def.Table, err)
	}
	return b, s.endBatch(b)
}

// capture is a Scan destination that keeps the driver's value as a Scan into an any does (which
// copies a []byte into an allocation of its own), but copies a []byte's bytes into blocks that
// a batch's rows share: no allocation for a value's bytes.
type capture struct {
	dst   *any
	bytes *[]byte // the block's rest
}

// captureBlock is the size of the blocks a batch's bytes are copied into.
const captureBlock = 32 << 10

// Scan implements sql.Scanner.
func (c *capture) Scan(src any) error {
	b, ok := src.([]byte)
	switch {
	case !ok:
		*c.dst = src
		return nil
	case b == nil:
		*c.dst = b // as bytes.Clone(nil): a nil []byte, not a nil any
		return nil
	case len(b) == 0:
		*c.dst = []byte{} // empty, not nil (NULL): the block may not be made yet
		return nil
	}
	if len(*c.bytes) < len(b) {
		*c.bytes = make([]byte, max(len(b), captureBlock))
	}
	blk := *c.bytes
	k := copy(blk, b)
	*c.dst = blk[:k:k] // its capacity ends with it: an append copies, never writes the next value
	*c.bytes = blk[k:]
	return nil
}

// checkKeys checks that row r has a value in every keyset column: a NULL one would never be read
// in order (ErrNullCursor).
func (s *Source) checkKeys(r row.Row) error {
	for j, idx := range s.shape.KeyIdx {
		if r.IsNull(idx) {
			return fmt.Errorf("source: poller %q, table %s, column %q: %w", s.poller, s.def.Table, s.shape.KeyCols[j], ErrNullCursor)
		}
	}
	return nil
}

// checkTextStamp checks, for a cursor column of text (TSText), that row r's cursor value v (as
// the driver gave it) reads as a time. Every row, not only the last (whose cursor the batch
// records): a value out of the fixed-width layout sorts out of time order, and rows like it sort
// behind the cursor.
func (s *Source) checkTextStamp(r row.Row, v any) error {
	if s.flavor != row.TSText {
		return nil
	}
	if t, ok := v.(string); ok && row.FixedWidth(t) {
		return nil
	}
	_, err := r.Cursor()
	return err
}

// endBatch sets b's To from its last row.
func (s *Source) endBatch(b *row.Batch) error {
	if len(b.Rows) == 0 {
		return nil
	}
	c, err := b.Rows[len(b.Rows)-1].Cursor()
	if err != nil {
		return err
	}
	b.To = &c
	return nil
}

// CheckCursor reports whether a stored cursor fits this source: its kind, its tiebreaker's
// columns, and every value against its column's type (a key value "abc" for a BIGINT column
// does not). The error wraps ErrCursor and names the column and value.
func (s *Source) CheckCursor(c *state.Cursor) error {
	if c == nil {
		return nil
	}
	return s.reader.checkCursor(c)
}

// CursorFromText builds a cursor of this source's kind from what an operator typed: value for
// the cursor column and keys[column] for each other key column, each read as its column's type
// (an integer column takes digits, a text column any text, a timestamp RFC 3339, a rowversion
// 0x and 16 hex digits). On SQLite a TEXT timestamp is written in the table's fixed-width
// layout. A value the column cannot hold is an error wrapping ErrCursor that names the column.
func (s *Source) CursorFromText(value string, keys map[string]string) (*state.Cursor, error) {
	fail := func(format string, args ...any) (*state.Cursor, error) {
		return nil, fmt.Errorf("source: poller %q: %w: %s", s.poller, ErrCursor, fmt.Sprintf(format, args...))
	}
	if stream, ok := s.reader.(streamReader); ok {
		if len(keys) > 0 {
			return fail("a %s cursor is a position in the change stream alone: give no key values", s.def.Cursor.Kind)
		}
		return stream.CursorFromText(value)
	}
	for k := range keys {
		if !slices.Contains(s.shape.KeyCols[1:], k) {
			return fail("%q is not one of the key columns after the cursor column (%s)", k, strings.Join(s.shape.KeyCols[1:], ", "))
		}
	}
	c := &state.Cursor{Kind: s.def.Cursor.Kind}
	for i, k := range s.shape.KeyCols {
		text := value
		if i > 0 {
			var ok bool
			if text, ok = keys[k]; !ok {
				return fail("no value for key column %q (give each of %s)", k, strings.Join(s.shape.KeyCols[1:], ", "))
			}
		}
		raw, err := s.rawFromText(i, text)
		if err != nil {
			return fail("column %q (%s): %q: %v", k, s.shape.Cols[s.shape.KeyIdx[i]].DBType, text, err)
		}
		if _, err := s.shape.Codecs[i].Decode(raw); err != nil {
			return fail("column %q (%s): %q: %v", k, s.shape.Cols[s.shape.KeyIdx[i]].DBType, text, err)
		}
		if i == 0 {
			c.Value = raw
		} else {
			if c.Tiebreaker == nil {
				c.Tiebreaker = map[string]json.RawMessage{}
			}
			c.Tiebreaker[k] = raw
		}
	}
	if err := c.Validate(); err != nil {
		return fail("%v", err)
	}
	return c, nil
}

// rawFromText renders an operator's text for key column i as the JSON its codec decodes.
func (s *Source) rawFromText(i int, text string) (json.RawMessage, error) {
	col := s.shape.Cols[s.shape.KeyIdx[i]]
	switch col.Class {
	case row.ClassInt:
		if _, err := strconv.ParseInt(text, 10, 64); err != nil {
			return nil, errors.New("not a whole number")
		}
		return json.RawMessage(text), nil
	case row.ClassXID8:
		if _, err := strconv.ParseUint(text, 10, 64); err != nil {
			return nil, errors.New("not a transaction id (decimal digits)")
		}
		return json.RawMessage(text), nil
	case row.ClassRowversion, row.ClassBinary:
		if len(text) != 18 || !strings.HasPrefix(text, "0x") {
			return nil, errors.New("not a rowversion like 0x00000000000007D1")
		}
		if _, err := hex.DecodeString(text[2:]); err != nil {
			return nil, errors.New("not a rowversion like 0x00000000000007D1")
		}
		return json.Marshal("0x" + strings.ToUpper(text[2:]))
	case row.ClassTime:
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return nil, errors.New("not an RFC 3339 timestamp like 2026-04-07T01:23:45.123456Z")
		}
		return json.Marshal(t.UTC().Format(time.RFC3339Nano))
	}
	if i == 0 && s.def.Cursor.Kind == state.KindTimestampPK { // SQLite TEXT timestamp
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return nil, errors.New("not an RFC 3339 timestamp like 2026-04-07T01:23:45.123456Z")
		}
		return json.Marshal(t.UTC().Format(state.TimeLayout))
	}
	return json.Marshal(text)
}
