package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/source/driver"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestStatusDetailLines pins the lines `pollerctl status` prints for what a source's driver
// reports besides the backlog: a replication slot (past its limit or not, measured now or at the
// last tick) and how reads are kept behind late commits (marked when by the settle lag alone).
func TestStatusDetailLines(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	d, _ := drivers.ForKind(state.KindLogical)
	slot := func(name string, probed *pgcdc.SlotState, history ...state.Tick) Row {
		in := driver.StatusInput{Poller: name, History: history, MaxRetained: 1 << 30}
		if probed != nil {
			in.Probe = []driver.Detail{{Key: "slot", Value: *probed}}
		}
		return Row{Poller: name, Health: pollerstatus.HealthOK, State: pollerstatus.StateNone, RowsWaiting: -1,
			Details: d.StatusDetails(in)}
	}
	rows := []Row{
		slot("lg", &pgcdc.SlotState{Name: "pt_lg", Exists: true, Active: true, ConfirmedFlush: "0/16D3290", RetainedBytes: n(4096)}),
		slot("lg2", nil, state.Tick{RetainedBytes: n(2 << 30)}),
		slot("gone", &pgcdc.SlotState{Name: "pt_gone"}),
		{Poller: "my", Health: pollerstatus.HealthOK, State: pollerstatus.StateNone, RowsWaiting: -1,
			Probe: &pollerstatus.Probe{OK: true, Details: []driver.Detail{mysql.OpenTrx{Active: true, Bound: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}.Detail()}}},
		{Poller: "my2", Health: pollerstatus.HealthOK, State: pollerstatus.StateNone, RowsWaiting: -1,
			Probe: &pollerstatus.Probe{OK: true, Details: []driver.Detail{mysql.OpenTrx{Reason: "the role cannot read information_schema.innodb_trx (MySQL error 1227)"}.Detail()}}},
	}
	var out bytes.Buffer
	if err := statusTable(Env{Out: &out}, rows); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, ": replication slot") || strings.Contains(l, ": late commits") {
			got = append(got, l)
		}
	}
	want := []string{
		"lg: replication slot pt_lg: keeps 4.0 KiB of WAL (limit 1.0 GiB) · confirmed 0/16D3290 · active: being read by a tick (a following tick streams it, or holds its stream for the next tick)",
		"lg2: replication slot keeps 2.0 GiB of WAL (limit 1.0 GiB) · at the last tick (PAST THE LIMIT)",
		"gone: replication slot pt_gone: does not exist (PAST THE LIMIT)",
		"my: late commits: open transactions (none open)",
		"my2: late commits: settle lag only: the role cannot read information_schema.innodb_trx (MySQL error 1227) (NOT SAFE FROM TRANSACTIONS LONGER THAN THE SETTLE LAG)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("status lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
