package sqlserver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// The SQL and the argument types go-mssqldb sends for each key column type, as a SQL Server
// would receive them (tdsServer): a comparison of a key column with its cursor value must be the
// column's own comparison, with the argument in the column's type, or the keyset predicate
// re-reads or skips rows at a batch boundary and the index may be scanned.

// wireSource opens, without a SQL Server, a source of dbo.t read by a cursor of kind on column
// c, keyed by k, with the column types given, its reads sent to srv.
func wireSource(t *testing.T, srv *tdsServer, kind string, types map[string]string) *source.Source {
	t.Helper()
	def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "t"}, Columns: []string{"c", "k"}, Cursor: sourcedef.Cursor{Kind: kind, Column: "c"}, PK: []string{"k"}}
	src, _ := standIn(t, srv, def, types)
	return src
}

// standIn lays out a source of def, the columns of the types given, as Open does, its reads sent
// to srv; it is closed when the test ends.
func standIn(t *testing.T, srv *tdsServer, def sourcedef.Definition, types map[string]string) (*source.Source, driver.Layout) {
	t.Helper()
	src, lay, err := source.Offline(Driver{}, source.Config{Poller: "p", Driver: Name, DSN: srv.DSN(), Definition: def}, types)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src, lay
}

// ctStandIn is a stand-in server and the layout of a changetracking poller of dbo.t (id BIGINT,
// v NVARCHAR) and more tables of those columns, whose reads find version 20 current and 1 the
// minimum valid.
func ctStandIn(t *testing.T, more ...sourcedef.TableDef) (*tdsServer, driver.Layout) {
	t.Helper()
	srv := newTDSServer(t)
	def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "t"}, Columns: []string{"id", "v"}, Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}, PK: []string{"id"}, More: more}
	_, lay := standIn(t, srv, def, map[string]string{"id": "BIGINT", "v": "NVARCHAR"})
	srv.answers["SELECT CHANGE_TRACKING_CURRENT_VERSION()"] = int64(20)
	srv.answers["SELECT CHANGE_TRACKING_MIN_VALID_VERSION"] = int64(1)
	return srv, lay
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// decl is the declaration of parameter p in a call's declarations ("@p1 datetime,..."): its
// type.
func decl(t *testing.T, call rpcCall, p string) string {
	t.Helper()
	for _, d := range strings.Split(call.Decl, ",") {
		if name, typ, ok := strings.Cut(strings.TrimSpace(d), " "); ok && name == p {
			return typ
		}
	}
	t.Fatalf("no parameter %s in %q (%s)", p, call.Decl, call.SQL)
	return ""
}

// TestKeyArgumentsOnTheWire: a timestamp+pk cursor on a datetime or smalldatetime column is sent
// as datetime, on datetime2 as datetime2(7), on datetimeoffset as datetimeoffset(7); a char or
// varchar key's marker is cast to varchar (go-mssqldb sends strings as nvarchar), an nvarchar
// key's is not.
func TestKeyArgumentsOnTheWire(t *testing.T) {
	srv := newTDSServer(t)
	at := json.RawMessage(`"2026-04-07T01:23:45.003Z"`)
	for _, c := range []struct {
		cursorType, keyType string
		key                 json.RawMessage
		wantCursor          string // @p1's type
		wantKey             string // @p2's type
		wantPred            string // in the SQL
	}{
		{"DATETIME", "BIGINT", json.RawMessage(`7`), "datetime", "bigint", "[c] >= @p1 AND ([c] > @p1 OR [k] > @p2)"},
		{"SMALLDATETIME", "INT", json.RawMessage(`7`), "datetime", "bigint", "[c] >= CAST(@p1 AS smalldatetime) AND ([c] > CAST(@p1 AS smalldatetime) OR [k] > @p2)"},
		{"DATETIME2", "BIGINT", json.RawMessage(`7`), "datetime2(7)", "bigint", "[c] >= @p1 AND ([c] > @p1 OR [k] > @p2)"},
		{"DATETIMEOFFSET", "BIGINT", json.RawMessage(`7`), "datetimeoffset(7)", "bigint", "[c] >= @p1 AND ([c] > @p1 OR [k] > @p2)"},
		{"DATETIME2", "VARCHAR", json.RawMessage(`"a-c"`), "datetime2(7)", "nvarchar(3)", "[c] >= @p1 AND ([c] > @p1 OR [k] > CAST(@p2 AS varchar(8000)))"},
		{"DATETIME", "CHAR", json.RawMessage(`"AB "`), "datetime", "nvarchar(3)", "[c] >= @p1 AND ([c] > @p1 OR [k] > CAST(@p2 AS varchar(8000)))"},
		{"DATETIME2", "NVARCHAR", json.RawMessage(`"a-c"`), "datetime2(7)", "nvarchar(3)", "[c] >= @p1 AND ([c] > @p1 OR [k] > @p2)"},
	} {
		t.Run(c.cursorType+"_"+c.keyType, func(t *testing.T) {
			src := wireSource(t, srv, state.KindTimestampPK, map[string]string{"c": c.cursorType, "k": c.keyType})
			cur := state.Cursor{Kind: state.KindTimestampPK, Value: at, Tiebreaker: map[string]json.RawMessage{"k": c.key}}
			if _, err := src.Fetch(ctx(t), &cur, 10); err != nil {
				t.Fatal(err)
			}
			call := srv.Call("FROM [dbo].[t] WHERE [c] >= ")
			if !strings.Contains(call.SQL, c.wantPred) {
				t.Errorf("the fetch sent\n%s\nwant the predicate %s", call.SQL, c.wantPred)
			}
			if got := decl(t, call, "@p1"); got != c.wantCursor {
				t.Errorf("the %s cursor value went as %s, want %s", c.cursorType, got, c.wantCursor)
			}
			if got := decl(t, call, "@p2"); got != c.wantKey {
				t.Errorf("the %s key went as %s, want %s", c.keyType, got, c.wantKey)
			}
		})
	}
}

// TestDatetimeArgumentsRoundTrip: every value a datetime column holds, read as go-mssqldb reads
// it (whole milliseconds: .003 for 3 1/3 ms) and carried in the cursor, goes back as the same
// datetime tick, which is what makes "c > @p1" exclude exactly the rows up to it. (As datetime2
// the .003 would be 3 ms, before the stored 3.333 ms: the row would come again.)
func TestDatetimeArgumentsRoundTrip(t *testing.T) {
	_, lay, err := source.Offline(Driver{}, source.Config{Poller: "p", Driver: Name, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: "t"}, Columns: []string{"c", "k"}, Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "c"}, PK: []string{"k"}}},
		map[string]string{"c": "DATETIME", "k": "BIGINT"})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 4, 7, 1, 23, 45, 0, time.UTC)
	for tick := range 300 {
		// go-mssqldb's reading of tick/300 s (decodeDateTime: rounded to the millisecond).
		read := base.Add(time.Duration(int((float64(tick)/0.3)+0.5)) * time.Millisecond)
		raw, err := lay.EncodeKey(0, read)
		if err != nil {
			t.Fatal(err)
		}
		arg, err := lay.DecodeKey(0, raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := argTick(arg); got != tick {
			t.Fatalf("tick %d, read as %s, goes back as tick %d (%T %v)", tick, read.Format(time.RFC3339Nano), got, arg, arg)
		}
	}
}

// argTick is the datetime tick (1/300 s within the second) go-mssqldb sends an argument as:
// encodeDateTime's rounding of a DateTime1's nanoseconds; -1 for an argument it does not send as
// datetime.
func argTick(arg any) int {
	d, ok := arg.(mssql.DateTime1)
	if !ok {
		return -1
	}
	return int(math.Round(float64(time.Time(d).Nanosecond()) * 3 / 1e7))
}

// TestRowversionBoundReadFirst: a rowversion read's bound, MIN_ACTIVE_ROWVERSION(), is read in a
// statement of its own and passed to the read as varbinary, not evaluated inside the read.
func TestRowversionBoundReadFirst(t *testing.T) {
	srv := newTDSServer(t)
	srv.answers[activeRowversionQuery] = []byte{0, 0, 0, 0, 0, 0, 0x07, 0xD1}
	src := wireSource(t, srv, state.KindRowversion, map[string]string{"c": "TIMESTAMP", "k": "BIGINT"})
	cur := state.Cursor{Kind: state.KindRowversion, Value: json.RawMessage(`"0x00000000000007C0"`), Tiebreaker: map[string]json.RawMessage{"k": json.RawMessage(`7`)}}
	if _, err := src.Fetch(ctx(t), &cur, 10); err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls()
	if len(calls) != 2 || calls[0].SQL != activeRowversionQuery {
		t.Fatalf("the fetch sent %+v, want the bound's query first and the read after", calls)
	}
	read := calls[1]
	if strings.Contains(read.SQL, "MIN_ACTIVE_ROWVERSION") || !strings.Contains(read.SQL, "[c] < @p3") {
		t.Errorf("the read\n%s\nevaluates the bound itself, or lacks [c] < @p3", read.SQL)
	}
	if got := decl(t, read, "@p3"); got != "varbinary(8)" {
		t.Errorf("the bound went as %s, want varbinary(8)", got)
	}
}

// TestChangeTrackingKeyArgumentsOnTheWire: a changetracking read resumed inside a version casts a
// varchar key's marker to varchar, as the keyset reads do (CHANGETABLE's key columns have the
// table's types and collations).
func TestChangeTrackingKeyArgumentsOnTheWire(t *testing.T) {
	srv := newTDSServer(t)
	def := sourcedef.Definition{Table: sourcedef.Table{Schema: "dbo", Name: "t"}, Columns: []string{"k", "v"}, Cursor: sourcedef.Cursor{Kind: state.KindChangeTracking}, PK: []string{"k"}}
	src, lay := standIn(t, srv, def, map[string]string{"k": "VARCHAR", "v": "INT"})
	c := newChangeTracking(lay)
	p, err := c.position(&state.Cursor{Kind: state.KindChangeTracking, Value: json.RawMessage(`9`), Tiebreaker: map[string]json.RawMessage{"k": json.RawMessage(`"a-c"`)}})
	if err != nil {
		t.Fatal(err)
	}
	args, inside, err := c.args(&p, sql.NullInt64{Int64: 12, Valid: true}, sql.NullInt64{Int64: 1, Valid: true})
	if err != nil || !inside {
		t.Fatalf("args: %v %v", inside, err)
	}
	rows, err := src.DB().QueryContext(ctx(t), c.queries().FetchAfter, append(args, 11)...)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	call := srv.Call("CHANGETABLE")
	if !strings.Contains(call.SQL, "ct.[k] > CAST(@p3 AS varchar(8000))") {
		t.Errorf("the read sent\n%s\nwant ct.[k] > CAST(@p3 AS varchar(8000))", call.SQL)
	}
	if got := decl(t, call, "@p3"); got != "nvarchar(3)" {
		t.Errorf("the key went as %s", got)
	}
}

// TestCodePageProblem: a varchar key column whose collation's code page is not the database
// default's is refused, naming the column, both collations and the fix; a column that is not a
// key is not.
func TestCodePageProblem(t *testing.T) {
	found := []codePage{
		{column: "note", collation: "Cyrillic_General_CI_AS", page: 1251, dbCollation: "SQL_Latin1_General_CP1_CI_AS", dbPage: 1252},
		{column: "Code", collation: "Greek_CI_AS", page: 1253, dbCollation: "SQL_Latin1_General_CP1_CI_AS", dbPage: 1252},
	}
	tbl := sourcedef.Table{Schema: "dbo", Name: "t"}
	if err := codePageProblem(Driver{}, tbl, []string{"id"}, found); err != nil {
		t.Errorf("no key column differs, yet: %v", err)
	}
	err := codePageProblem(Driver{}, tbl, []string{"id", "code"}, found)
	if !errors.Is(err, source.ErrSchema) {
		t.Fatalf("a key column of code page 1253 in a 1252 database: %v", err)
	}
	for _, want := range []string{`column "Code"`, "Greek_CI_AS has code page 1253", "SQL_Latin1_General_CP1_CI_AS has 1252", "ALTER TABLE [dbo].[t] ALTER COLUMN [Code] ... COLLATE SQL_Latin1_General_CP1_CI_AS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

// TestCommitTimeNeedsThePermission: the changes carry their commit time only when the user may
// see the latest commits in sys.dm_tran_commit_table (VIEW SERVER STATE; VIEW DATABASE STATE on
// Azure SQL Database). A server that lets the view be read (no error, as SQL Server does for a
// user without the permission, whose newest commits it then leaves out) is not enough.
func TestCommitTimeNeedsThePermission(t *testing.T) {
	srv := newTDSServer(t)
	db, err := Driver{}.Open(srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if readsCommitTime(ctx(t), db) {
		t.Error("the commit time is read although the permission probe did not say 1")
	}
	call := srv.Call("sys.dm_tran_commit_table")
	for _, want := range []string{"HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE') = 1", "'EngineEdition'", "'VIEW DATABASE STATE'"} {
		if !strings.Contains(call.SQL, want) {
			t.Errorf("the probe lacks %s:\n%s", want, call.SQL)
		}
	}
	srv.answers[ctCommitTimeProbe] = int32(1)
	if !readsCommitTime(ctx(t), db) {
		t.Error("the commit time is not read although the probe said 1")
	}
}

// TestChangeTrackingRunOnTheWire: a fetch that stops short of its bound leaves the next fetch,
// from where it ended, the bound it read (no new CHANGE_TRACKING_CURRENT_VERSION()) and its
// base: the ops of a backlog paged in batches are relative to where the backlog began, as one
// read of it all would give them, not to each batch's position (where a row inserted in the
// backlog and updated before the poller came to it would be an "update"). A fetch from any
// other cursor, or after one that read all there was, reads its own bound from its own base.
func TestChangeTrackingRunOnTheWire(t *testing.T) {
	srv, lay := ctStandIn(t)
	c := newChangeTracking(lay)
	// version, op, found, id, v: a backlog of versions 5 and 6, read two at a time.
	srv.answers["SELECT TOP"] = tdsRows{
		{int64(5), "I", int64(1), int64(1), "a"},
		{int64(5), "I", int64(1), int64(2), "b"},
		{int64(6), "I", int64(1), int64(3), "c"},
	}
	fetch := func(after *state.Cursor) (*row.Batch, []rpcCall) {
		t.Helper()
		n := len(srv.Calls())
		b, err := c.Fetch(ctx(t), after, 2)
		if err != nil {
			t.Fatal(err)
		}
		return b, srv.Calls()[n:]
	}
	read := func(calls []rpcCall) (current bool, ints []int64) {
		for _, call := range calls {
			current = current || call.SQL == "SELECT CHANGE_TRACKING_CURRENT_VERSION()"
			if strings.HasPrefix(call.SQL, "SELECT TOP") {
				ints = call.Ints
			}
		}
		return current, ints
	}

	b1, calls := fetch(nil)
	if cur, ints := read(calls); !cur || !slices.Equal(ints, []int64{1, 1, 20, 3}) {
		t.Fatalf("the first fetch: read the bound %v, arguments %v; want true, [1 1 20 3] (base, after version, bound, limit)", cur, ints)
	}
	if len(b1.Rows) != 2 || b1.To == nil || b1.To.Tiebreaker == nil {
		t.Fatalf("the first fetch: %d rows, to %+v; want 2, inside version 5", len(b1.Rows), b1.To)
	}
	_, calls = fetch(b1.To)
	if cur, ints := read(calls); cur || !slices.Equal(ints, []int64{1, 5, 2, 20, ctReadAhead + 1}) {
		t.Errorf("the next fetch of the run: read a bound %v, arguments %v; want false, [1 5 2 20 %d] (the run's base and bound, inside version 5 after id 2, reading ahead)", cur, ints, ctReadAhead+1)
	}
	// Another cursor (a retry of the first fetch) begins a run of its own.
	_, calls = fetch(nil)
	if cur, ints := read(calls); !cur || !slices.Equal(ints, []int64{1, 1, 20, 3}) {
		t.Errorf("a retry from the beginning: read the bound %v, arguments %v", cur, ints)
	}
	inside := state.Cursor{Kind: state.KindChangeTracking, Value: json.RawMessage(`5`), Tiebreaker: map[string]json.RawMessage{"id": json.RawMessage(`9`)}}
	_, calls = fetch(&inside)
	if cur, ints := read(calls); !cur || !slices.Equal(ints, []int64{4, 5, 9, 20, 3}) {
		t.Errorf("a fetch from a stored cursor inside version 5: read the bound %v, arguments %v; want its own base 4", cur, ints)
	}
	// A fetch that read all there was ends the run.
	srv.answers["SELECT TOP"] = tdsRows{{int64(7), "U", int64(1), int64(1), "a2"}}
	b, _ := fetch(nil)
	_, calls = fetch(b.To)
	if cur, _ := read(calls); !cur {
		t.Error("a fetch after one that reached its bound did not read a new bound")
	}
}

// TestChangeTrackingTablesRunOnTheWire: a poller of several tables pages a backlog as one run
// too: the next fetch reads each table under the run's bound and from that table's base.
func TestChangeTrackingTablesRunOnTheWire(t *testing.T) {
	srv, lay := ctStandIn(t, sourcedef.TableDef{Table: sourcedef.Table{Schema: "dbo", Name: "b"}, Columns: []string{"id", "v"}, PK: []string{"id"}})
	m := newCTTables(lay)
	srv.answers["SELECT TOP"] = tdsRows{ // each table's read: versions 5 and 6
		{int64(5), "I", int64(1), int64(1), "a"},
		{int64(5), "I", int64(1), int64(2), "b"},
		{int64(6), "I", int64(1), int64(3), "c"},
	}
	reads := func(from int) (current bool, ints [][]int64) {
		for _, call := range srv.Calls()[from:] {
			current = current || call.SQL == "SELECT CHANGE_TRACKING_CURRENT_VERSION()"
			if strings.HasPrefix(call.SQL, "SELECT TOP") {
				ints = append(ints, call.Ints)
			}
		}
		return current, ints
	}
	b, err := m.Fetch(ctx(t), nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 2 || b.To == nil || b.To.Tiebreaker == nil {
		t.Fatalf("the first fetch: %d rows, to %+v; want 2, inside version 5", len(b.Rows), b.To)
	}
	n := len(srv.Calls())
	if _, err := m.Fetch(ctx(t), b.To, 2); err != nil {
		t.Fatal(err)
	}
	cur, ints := reads(n)
	want := [][]int64{{1, 5, 2, 20, 3}, {1, 4, 20, 3}} // dbo.t after its key 2 in version 5, dbo.b version 5 again
	if cur || len(ints) != 2 || !slices.Equal(ints[0], want[0]) || !slices.Equal(ints[1], want[1]) {
		t.Errorf("the next fetch of the run: read a bound %v, arguments %v; want false, %v", cur, ints, want)
	}
}

// TestChangeTrackingReadAhead: the fetches of a run after its first read ahead, and take their
// batches from what they read without asking the server again; the batch that takes the last of
// it, when that read reached its bound, ends the run on a version boundary.
func TestChangeTrackingReadAhead(t *testing.T) {
	srv, lay := ctStandIn(t)
	c := newChangeTracking(lay)
	row := func(v, id int64) []any { return []any{v, "I", int64(1), id, "x"} }
	// The stand-in answers every read with these rows: each read's answer is set to what the
	// server would return after the read's position.
	srv.answers["SELECT TOP"] = tdsRows{row(5, 1), row(5, 2), row(5, 3), row(5, 4), row(6, 5), row(6, 6), row(6, 7)}
	type fetched struct {
		ids   []int64
		calls int
		to    *state.Cursor
	}
	fetch := func(after *state.Cursor) fetched {
		t.Helper()
		n := len(srv.Calls())
		b, err := c.Fetch(ctx(t), after, 2)
		if err != nil {
			t.Fatal(err)
		}
		f := fetched{calls: len(srv.Calls()) - n, to: b.To}
		for _, r := range b.Rows {
			id, _ := r.Key()["id"].(int64)
			f.ids = append(f.ids, id)
		}
		return f
	}
	f1 := fetch(nil)
	if !slices.Equal(f1.ids, []int64{1, 2}) {
		t.Fatalf("the first fetch: %v", f1.ids)
	}
	srv.answers["SELECT TOP"] = tdsRows{row(5, 3), row(5, 4), row(6, 5), row(6, 6), row(6, 7)}
	f2 := fetch(f1.to)
	if !slices.Equal(f2.ids, []int64{3, 4}) || f2.calls == 0 {
		t.Fatalf("the run's second fetch, reading ahead: %v after %d statements", f2.ids, f2.calls)
	}
	f3 := fetch(f2.to)
	if !slices.Equal(f3.ids, []int64{5, 6}) || f3.calls != 0 {
		t.Errorf("the third fetch: %v after %d statements; want [5 6] from what the second read, none", f3.ids, f3.calls)
	}
	f4 := fetch(f3.to)
	if !slices.Equal(f4.ids, []int64{7}) || f4.calls != 0 {
		t.Errorf("the fourth fetch: %v after %d statements; want [7], none", f4.ids, f4.calls)
	}
	if f4.to == nil || f4.to.Tiebreaker != nil || string(f4.to.Value) != "6" {
		t.Errorf("the run's last batch ends at %+v, want version 6's boundary", f4.to)
	}
	srv.answers["SELECT TOP"] = tdsRows{}
	delete(srv.answers, "SELECT TOP")
	if f5 := fetch(f4.to); f5.calls == 0 || len(f5.ids) != 0 {
		t.Errorf("after the run: %v after %d statements; want a read of its own, nothing new", f5.ids, f5.calls)
	}
}

// TestTimezoneSettingRefused: a go-mssqldb connection string whose timezone is not UTC would
// shift every datetime key argument by the zone's offset: it is refused, naming the setting.
func TestTimezoneSettingRefused(t *testing.T) {
	for dsn, ok := range map[string]bool{
		"sqlserver://u:p@h?database=d":                           true,
		"sqlserver://u:p@h?database=d&timezone=UTC":              true,
		"sqlserver://u:p@h?database=d&timezone=Europe%2FParis":   false,
		"server=h;user id=u;password=p;timezone=America/Chicago": false,
	} {
		_, err := Driver{}.Open(dsn)
		_, lerr := Driver{}.Location(dsn)
		if (err == nil) != ok || (lerr == nil) != ok {
			t.Errorf("%s: open %v, location %v", dsn, err, lerr)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "timezone=")) {
			t.Errorf("%s: the error does not name the setting: %v", dsn, err)
		}
	}
}

// TestBackfillChunkArgumentsOnTheWire: a backfill's chunk compares the primary key after the
// last chunk, and each row's version with the live position, as the keyset reads do: a varchar
// key's markers cast to varchar, a smalldatetime cursor's to smalldatetime.
func TestBackfillChunkArgumentsOnTheWire(t *testing.T) {
	srv := newTDSServer(t)
	src := wireSource(t, srv, state.KindTimestampPK, map[string]string{"c": "SMALLDATETIME", "k": "VARCHAR"})
	pos := state.Cursor{Kind: state.KindTimestampPK, Value: json.RawMessage(`"2026-04-07T01:23:00Z"`), Tiebreaker: map[string]json.RawMessage{"k": json.RawMessage(`"a-c"`)}}
	if _, err := src.ReadChunk(ctx(t), map[string]json.RawMessage{"k": json.RawMessage(`"ab"`)}, "", &pos, 10); err != nil {
		t.Fatal(err)
	}
	call := srv.Call("CASE WHEN")
	for _, want := range []string{
		"CASE WHEN [c] >= CAST(@p1 AS smalldatetime) AND ([c] > CAST(@p1 AS smalldatetime) OR [k] > CAST(@p2 AS varchar(8000))) THEN 1 ELSE 0 END",
		"[k] > CAST(@p3 AS varchar(8000))",
	} {
		if !strings.Contains(call.SQL, want) {
			t.Errorf("the chunk's read\n%s\nlacks %s", call.SQL, want)
		}
	}
}

// TestSmalldatetimeCursorTruncated: a smalldatetime cursor an operator typed with seconds goes
// back as the minute it falls in (its rows come again), not rounded up past them by the cast.
func TestSmalldatetimeCursorTruncated(t *testing.T) {
	_, lay, err := source.Offline(Driver{}, source.Config{Poller: "p", Driver: Name, Definition: sourcedef.Definition{
		Table: sourcedef.Table{Name: "t"}, Columns: []string{"c", "k"}, Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "c"}, PK: []string{"k"}}},
		map[string]string{"c": "SMALLDATETIME", "k": "BIGINT"})
	if err != nil {
		t.Fatal(err)
	}
	arg, err := lay.DecodeKey(0, json.RawMessage(`"2026-04-07T01:23:45Z"`))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := arg.(mssql.DateTime1); !ok || !time.Time(d).Equal(time.Date(2026, 4, 7, 1, 23, 0, 0, time.UTC)) {
		t.Errorf("01:23:45 goes back as %T %v, want 01:23:00 as datetime", arg, arg)
	}
}
