package pgcdc_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/drivers"
	"github.com/pseudotrigger/pseudotrigger/internal/source/postgres/pgcdc"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
)

// TestCDCEnableMessages: a messages outbox's enable makes a publication of no table and the
// slot (no table is checked), what its plan shows says so, the reader opens on them, the
// status probe reads the slot, and disable drops both.
func TestCDCEnableMessages(t *testing.T) {
	c := newCDCSetup(t)
	d := &c.cfg.Definition
	d.Table, d.Columns, d.PK = sourcedef.Table{}, nil, nil
	d.Outbox = &sourcedef.Outbox{Messages: "app-" + c.table, AggregateType: "agg", AggregateID: "agg_id"}
	cdc := c.open(t)
	ctx := context.Background()
	info, err := cdc.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	plan := cdc.PlanEnable(info)
	if len(plan.Problems) > 0 || len(plan.Steps) != 2 || plan.Steps[0] != `CREATE PUBLICATION "`+c.table+`"` ||
		!strings.Contains(plan.Steps[1], "pg_create_logical_replication_slot('"+c.table+"', 'pgoutput')") {
		t.Fatalf("plan: %+v", plan)
	}
	shown, err := cdc.Setup().PlanEnable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(shown.Info, "\n")
	if !strings.Contains(text, `none: the transactional messages of prefix "app-`+c.table+`"`) || strings.Contains(text, "ownership of table") {
		t.Errorf("the plan shows:\n%s", text)
	}
	// pollerctl check: no table to check; the change stream's set-up is not enabled yet.
	check := func() map[string]setup.Finding {
		t.Helper()
		st, err := source.CheckSetup(ctx, drivers.All(), c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		out := map[string]setup.Finding{}
		for _, f := range st.Findings {
			out[f.Check] = f
		}
		if len(out) != 2 {
			t.Errorf("findings: %+v", st.Findings)
		}
		return out
	}
	fs := check()
	if f := fs[setup.CheckTable]; f.Verdict != setup.VerdictOK || !strings.Contains(f.Detail, `none: a messages outbox reads the transactional messages of prefix "app-`) {
		t.Errorf("table: %+v", f)
	}
	if f := fs[setup.CheckCDC]; f.Verdict != setup.VerdictProblem || !strings.Contains(f.Detail, "not enabled: run `pollerctl cdc enable p --yes`") {
		t.Errorf("before enable: %+v", f)
	}
	if _, err := cdc.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	if f := check()[setup.CheckCDC]; f.Verdict != setup.VerdictOK {
		t.Errorf("after enable: %+v", f)
	}
	if slot, pub := c.exists(t); !slot || !pub {
		t.Fatalf("after enable: slot %v publication %v", slot, pub)
	}
	src, err := drivers.Open(ctx, c.cfg)
	if err != nil {
		t.Fatalf("Open after Enable: %v", err)
	}
	details, err := src.Inspect(ctx, "p")
	src.Close()
	if err != nil || len(details) != 1 || !details[0].Value.(pgcdc.SlotState).Exists {
		t.Fatalf("Source.Inspect: %+v %v", details, err)
	}
	if dd, err := cdc.Disable(ctx); err != nil || !dd.DroppedSlot || !dd.DroppedPublication {
		t.Fatalf("disable: %+v %v", dd, err)
	}
}
