package postgres

import (
	"context"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestPeekStatementByExecMode: with pgx's default query mode the peek is a statement prepared
// once on the connection; with a mode a DSN through a transaction pooler sets (exec,
// simple_protocol, cache_describe) no statement stays on the connection. Each reads the changes.
func TestPeekStatementByExecMode(t *testing.T) {
	db, dsn, table, slot := testenv.PostgresLogical(t, "CREATE TABLE %s (id bigint PRIMARY KEY, name text NOT NULL, note text)")
	testenv.ExecFlushed(t, db, "INSERT INTO "+table+" SELECT g, 'n', NULL FROM generate_series(1, 7) g")
	for _, tc := range []struct {
		mode     string
		prepared int
	}{{"", 1}, {"cache_statement", 1}, {"cache_describe", 0}, {"exec", 0}, {"simple_protocol", 0}} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			d := dsn
			if tc.mode != "" {
				d = testenv.WithParam(dsn, "default_query_exec_mode", tc.mode)
			}
			cd := &captureDriver{}
			src, err := source.Open(context.Background(), source.Drivers{cd}, source.Config{Poller: "peek", Driver: Name, DSN: d, MaxOpenConns: 1,
				Definition: source.Definition{Table: source.Table{Name: table}, Columns: []string{"id", "name", "note"}, PK: []string{"id"},
					Cursor: source.Cursor{Kind: state.KindLogical}, Slot: slot, Publication: slot}})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			b, err := src.Fetch(context.Background(), nil, 100)
			if err != nil || len(b.Rows) != 7 {
				t.Fatalf("fetch: %v rows, %v", b, err)
			}
			var n int
			// The pool's one connection, the peek's.
			err = cd.got.lay.DB().QueryRowContext(context.Background(), "SELECT count(*) FROM pg_prepared_statements WHERE name IN ($1, $2)", peekStmt, peekStmt13).Scan(&n)
			if err != nil || n != tc.prepared {
				t.Fatalf("%d peek statements prepared on the connection, want %d (%v)", n, tc.prepared, err)
			}
		})
	}
}
