package tick_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/lease"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/internal/tick"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// tickLines are the "tick" lines of a JSON log written so far, decoded.
func tickLines(t *testing.T, log *testenv.Buffer) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "tick" {
			out = append(out, m)
		}
	}
	return out
}

// TestMySQLTickNamesLateCommitBound: a MySQL timestamp+pk poller's tick line says how its reads
// were kept behind late commits: by the open transactions, naming the one holding the read back
// while a transaction that stamped a row stays open; the row committed after it waits, and the
// line counts it as waiting. The held row and the later one come, in stamp order, in the tick
// after it commits.
func TestMySQLTickNamesLateCommitBound(t *testing.T) {
	dsn := testenv.MySQL(t)
	db, err := sql.Open("mysql", dsn+"?parseTime=true&loc=UTC&time_zone=%27%2B00%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table := testenv.Name("tickbound_")
	if _, err := db.Exec("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, ts DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)), KEY (ts, id))"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DROP TABLE " + table) })

	var logs testenv.Buffer
	rec := &recorder{}
	p := poller.New("orders", table, poller.TimestampPK, rec.handle, poller.WithColumns("id", "ts"), poller.WithKey("id"),
		poller.WithCursorColumn("ts"), poller.WithSettleLag(sourcedef.NoSettleLag))
	settings := appsettings.Settings{Driver: mysql.Name, DSN: dsn, SettleLag: sourcedef.NoSettleLag, BatchSize: 10,
		LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Minute}
	r, err := tick.Open(ctx, tick.Config{Poller: pollerdef.Of(p), Settings: settings, Store: memstore.New(nil), App: "test", Owner: "o1",
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	held, thread := testenv.MySQLHeld(t, db, table, 1)
	if _, err := db.Exec("INSERT INTO " + table + " (id) VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	// Other tests' processes read innodb_trx too, which can keep it stale for a while (the source
	// then holds its reads back, or keeps an older bound): tick until a fresh one names row 1's.
	want := fmt.Sprintf("open transactions (the oldest, connection %d, open ", thread)
	var bound string
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := r.Tick(ctx, "held"); err != nil {
			t.Fatal(err)
		}
		lines := tickLines(t, &logs)
		bound, _ = lines[len(lines)-1]["late_commit_bound"].(string)
		if len(rec.ids) != 0 {
			t.Fatalf("with row 1's transaction open: delivered %v (late_commit_bound %q)", rec.ids, bound)
		}
		if strings.HasPrefix(bound, want) && strings.HasSuffix(bound, " s)") {
			// Row 2, committed behind it, waits: the line shows it, and its age, not an idle poller.
			if line := lines[len(lines)-1]; line["rows_waiting"] != 1.0 || line["lag_seconds"] == nil {
				t.Fatalf("the tick line while row 1 is held: %v; want rows_waiting 1 and a lag", line)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tick line's late_commit_bound is %q, want %q...", bound, want)
		}
		time.Sleep(100 * time.Millisecond) // polling the tick, with a deadline
	}
	t.Logf("tick line while row 1 is held: late_commit_bound=%q", bound)
	if err := held.Commit(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); len(rec.ids) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("after the commit, delivered %v", rec.ids)
		}
		if _, err := r.Tick(ctx, "after"); err != nil {
			t.Fatal(err)
		}
	}
	if rec.ids[0] != 1 || rec.ids[1] != 2 || len(rec.ids) != 2 {
		t.Fatalf("delivered %v, want [1 2]", rec.ids)
	}
}
