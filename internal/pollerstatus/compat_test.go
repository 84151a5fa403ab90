package pollerstatus_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name (go test -run Compat -update rewrites them).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed:\n%s\nwant:\n%s", name, got, want)
	}
}

// TestStatusCompat pins, byte for byte, what the status says of what a source's driver reports
// besides the backlog: a replication slot (the probe's, and the last tick's measure of it) and
// how reads are kept behind late commits, in the row's and the probe's JSON, on the page's card
// and in the health reason.
func TestStatusCompat(t *testing.T) {
	now, clk, st, probe, cfg := slotWorld()
	doc := logicalDoc("0/16D3290")
	doc.AddHistory(state.Tick{At: state.At(now), Outcome: "committed", Rows: 2, RowsWaiting: 0, Ops: map[string]int{"update": 2},
		RetainedBytes: bytesPtr(2 << 20)})
	putDoc(t, st, doc)
	clk.Advance(time.Second)

	slot := pgcdc.SlotState{Name: "pt_orders", Exists: true, Type: "logical", Plugin: "pgoutput", Database: "app", Here: true,
		ConfirmedFlush: "0/16D3290", RestartLSN: "0/16D0000", RetainedBytes: bytesPtr(3 << 20), WALStatus: "reserved", WALEnd: "0/16E0000"}
	*probe = pollerstatus.Probe{OK: true, RowsWaiting: 0, LagSeconds: ptr(0), DurationMS: 4, Details: []driver.Detail{{Key: "slot", Value: slot}}}
	fromProbe := pollerstatus.Read(ctx, st, cfg, "orders")
	*probe = pollerstatus.Probe{Skipped: "no settings", RowsWaiting: -1}
	fromTick := pollerstatus.Read(ctx, st, cfg, "orders")
	late := pollerstatus.Probe{OK: true, RowsWaiting: 3, LagSeconds: ptr(1.5), DurationMS: 7,
		Details: []driver.Detail{mysql.OpenTrx{Reason: "the role cannot read information_schema.innodb_trx (MySQL error 1227)"}.Detail()}}
	bound := pollerstatus.Probe{OK: true, RowsWaiting: 0, LagSeconds: ptr(0), DurationMS: 2,
		Details: []driver.Detail{mysql.OpenTrx{Active: true, Bound: time.Date(2026, 11, 22, 11, 59, 0, 0, time.UTC), OldestSeconds: 61, OldestThread: 42}.Detail()}}

	var out bytes.Buffer
	for _, v := range []struct {
		name string
		v    any
	}{{"row, slot from the probe", fromProbe}, {"row, slot from the last tick", fromTick}, {"probe, settle lag only", late}, {"probe, open transactions", bound}} {
		j, err := json.Marshal(v.v)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("-- " + v.name + "\n")
		out.Write(j)
		out.WriteString("\n")
	}
	for _, r := range []pollerstatus.Row{fromProbe, fromTick} {
		out.WriteString("-- health: " + r.Health + ": " + r.HealthReason + "\n")
	}
	golden(t, "details.json.txt", out.Bytes())

	lateRow := pollerstatus.Row{Poller: "late", Health: pollerstatus.HealthOK, Registered: true, Probe: &late}
	boundRow := pollerstatus.Row{Poller: "bound", Health: pollerstatus.HealthOK, Registered: true, Probe: &bound}
	var page bytes.Buffer
	if err := pollerstatus.RenderPage(&page, pollerstatus.NewPage(pollerstatus.Report{App: "test", Pollers: []pollerstatus.Row{fromProbe, fromTick, lateRow, boundRow}})); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(page.String(), "\n") {
		if strings.Contains(l, "<h2>") || strings.Contains(l, `class="slot`) || strings.Contains(l, `class="latecommits`) {
			lines = append(lines, l)
		}
	}
	golden(t, "details.html.txt", []byte(strings.Join(lines, "\n")+"\n"))
}
