package pollerstatus_test

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestMySQLProbeShowsLateCommitBound: the probe of a MySQL timestamp+pk poller says how its reads
// are kept behind late commits, and the page's card and pollerctl's text show it: by the open
// transactions for a role with PROCESS; by the settle lag alone, marked, with the GRANT to run,
// for a role without.
func TestMySQLProbeShowsLateCommitBound(t *testing.T) {
	dsn := testenv.MySQL(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table := testenv.Name("probe_")
	if _, err := db.Exec("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, ts DATETIME(6) NOT NULL, KEY (ts, id))"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })
	def := sourcedef.Definition{Table: sourcedef.Table{Name: table}, Columns: []string{"id", "ts"}, PK: []string{"id"},
		Cursor: sourcedef.Cursor{Kind: state.KindTimestampPK, Column: "ts"}}

	for _, c := range []struct {
		name string
		dsn  string
		weak bool
		want string
	}{
		{"with PROCESS", dsn, false, "open transactions ("},
		{"without PROCESS", testenv.MySQLUser(t, db, dsn, "SELECT"), true, "settle lag only: the role cannot read information_schema.innodb_trx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := drivers.Open(context.Background(), source.Config{Poller: "orders", Driver: mysql.Name, DSN: c.dsn, Definition: def})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			// Other tests' processes read innodb_trx too, which can keep it stale for a while:
			// probe until the bound is a fresh one (or the denial).
			var (
				p    pollerstatus.Probe
				text string
				weak bool
			)
			for deadline := time.Now().Add(20 * time.Second); ; {
				p = pollerstatus.ProbeSource(context.Background(), src, "state/test/orders.json", nil, time.Now)
				if !p.OK || len(p.Details) != 1 || p.Details[0].Key != "open_trx" {
					t.Fatalf("probe %+v: want ok, with open_trx", p)
				}
				o := p.Details[0].Value.(mysql.OpenTrx)
				text, weak = p.Details[0].Text, p.Details[0].Bad
				fresh := o.Active && o.Reason == "" // not an older bound, nor none trusted yet
				if weak == c.weak && strings.HasPrefix(text, c.want) && (fresh || c.weak && strings.Contains(text, "GRANT PROCESS ON *.* TO '")) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("late commits %q, %v; want %q..., weak %v", text, weak, c.want, c.weak)
				}
				time.Sleep(100 * time.Millisecond) // polling the probe, with a deadline
			}
			var page bytes.Buffer
			rep := pollerstatus.Report{App: "test", Pollers: []pollerstatus.Row{{Poller: "orders", Probe: &p}}}
			if err := pollerstatus.RenderPage(&page, pollerstatus.NewPage(rep)); err != nil {
				t.Fatal(err)
			}
			class := `class="latecommits"`
			if c.weak {
				class = `class="latecommits bad"`
			}
			if !strings.Contains(page.String(), `<th>late commits</th><td `+class+`>`) {
				t.Fatalf("the page has no late commits line with %s:\n%s", class, page.String())
			}
			t.Logf("%s: %s", c.name, text)
		})
	}
}
