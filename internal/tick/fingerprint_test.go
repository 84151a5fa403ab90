package tick_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sqlite"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/store"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestDocumentOfTheFirstFormRunsOn, on each database here: a state document written before the
// fingerprint's second form (it covered the payload columns, and records no source) is taken up
// by the next tick with no operator's step, which delivers from its cursor and records the second
// form, the source and the handler's version. A payload column removed from the poller afterwards
// is accepted and logged, and the ticks go on delivering.
func TestDocumentOfTheFirstFormRunsOn(t *testing.T) {
	for _, db := range []struct{ name, driver, sqlDriver string }{
		{"sqlite", sqlite.Name, "sqlite"}, {"postgres", postgres.Name, "pgx"}, {"mariadb", mysql.Name, "mysql"},
	} {
		t.Run(db.name, func(t *testing.T) {
			var dsn string
			switch db.name {
			case "sqlite":
				dsn = filepath.Join(t.TempDir(), "fp.db")
			case "postgres":
				dsn = testenv.Postgres(t)
			default:
				dsn = testenv.MySQL(t)
			}
			conn, err := sql.Open(db.sqlDriver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			table := testenv.Name("fp_")
			if _, err := conn.Exec("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Exec("DROP TABLE " + table) })
			next := 0
			insert := func(n int) {
				t.Helper()
				for range n {
					next++
					if _, err := conn.Exec(fmt.Sprintf("INSERT INTO %s VALUES (%d, 'c%d', 1.00)", table, next, next)); err != nil {
						t.Fatal(err)
					}
				}
			}
			insert(4)

			st := memstore.New(nil)
			var logs testenv.Buffer
			settings := appsettings.Settings{Driver: db.driver, DSN: dsn, SettleLag: sourcedef.NoSettleLag, BatchSize: 10,
				LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Minute}
			run := func(columns ...string) []int64 {
				t.Helper()
				rec := &recorder{}
				p := pollerdef.Of(poller.New("orders", table, poller.Integer, rec.handle, poller.WithColumns(columns...), poller.WithKey("id"),
					poller.WithCursorColumn("id")))
				r, err := tick.Open(ctx, tick.Config{Poller: p, Settings: settings, Store: st, App: "test", Owner: "o1", Version: "v0.0.0 rev test",
					Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if _, err := r.Tick(ctx, "inv"); err != nil {
					t.Fatalf("tick: %v", err)
				}
				return rec.ids
			}

			// The document as the first form left it: cursor after row 2, token 5.
			p := pollerdef.Of(poller.New("orders", table, poller.Integer, (&recorder{}).handle, poller.WithColumns("id", "customer", "amount"), poller.WithKey("id"),
				poller.WithCursorColumn("id")))
			id, err := settings.Identity(p)
			if err != nil {
				t.Fatal(err)
			}
			old := &state.Doc{Version: 1, PollerName: "orders", SourceFingerprint: id.FingerprintV1(),
				Checkpoint: state.Checkpoint{Cursor: &state.Cursor{Kind: state.KindInteger, Value: json.RawMessage("2")}}, Lease: state.Lease{FencingToken: 5}}
			data, err := state.Encode(old)
			if err != nil {
				t.Fatal(err)
			}
			blob := blobpath.State("test", "orders")
			if _, err := st.Put(ctx, blob, data, store.IfNotExists()); err != nil {
				t.Fatal(err)
			}

			if got := run("id", "customer", "amount"); fmt.Sprint(got) != "[3 4]" {
				t.Fatalf("delivered %v after the first-form document, want [3 4]", got)
			}
			b, err := st.Get(ctx, blob)
			if err != nil {
				t.Fatal(err)
			}
			d, err := state.Decode(blob, "orders", b.Data)
			if err != nil {
				t.Fatal(err)
			}
			if d.SourceFingerprint != id.Fingerprint() || d.Source == nil || d.Source.Table != table || d.HandlerVersion != "v0.0.0 rev test" ||
				d.Lease.FencingToken != 6 {
				t.Fatalf("the document after the tick:\n%s", b.Data)
			}
			if !strings.Contains(logs.String(), "first form") {
				t.Fatalf("the accepted first form was not logged:\n%s", logs.String())
			}

			insert(1)
			if got := run("id", "customer"); fmt.Sprint(got) != "[5]" {
				t.Fatalf("delivered %v after a payload column was removed, want [5]", got)
			}
			if !strings.Contains(logs.String(), "removed amount") {
				t.Fatalf("the payload change was not logged:\n%s", logs.String())
			}
		})
	}
}
