package devhost

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFunctionsResolveSchedules(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name, "function.json"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("orders", `{"bindings":[{"type":"timerTrigger","direction":"in","name":"timer","schedule":"%ORDERS_SCHEDULE%"}]}`)
	write("literal", `{"bindings":[{"type":"timerTrigger","direction":"in","name":"t","schedule":"0 * * * * *"}]}`)
	write("http", `{"bindings":[{"type":"httpTrigger","direction":"in","name":"req"}]}`)
	fns, err := Functions(root, map[string]string{"ORDERS_SCHEDULE": "*/5 * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 2 || fns[0] != (Function{Name: "literal", Binding: "t", Schedule: "0 * * * * *"}) || fns[1] != (Function{Name: "orders", Binding: "timer", Schedule: "*/5 * * * * *"}) {
		t.Fatalf("%+v", fns)
	}
	// A missing setting fails that function alone, naming the setting; the other keeps its timer.
	fns, err = Functions(root, map[string]string{})
	if err != nil || len(fns) != 2 || fns[0].Err != nil {
		t.Fatalf("a missing setting: %+v %v", fns, err)
	}
	if !errors.Is(fns[1].Err, ErrNoSchedule) || !strings.Contains(fns[1].Err.Error(), "ORDERS_SCHEDULE is not set") {
		t.Fatalf("a missing setting: %v", fns[1].Err)
	}
	if fns, _ := Functions(root, map[string]string{"ORDERS_SCHEDULE": "every minute"}); fns[1].Err == nil || fns[0].Err != nil {
		t.Fatalf("an invalid schedule: %+v", fns)
	}
}

func TestPayloadIsTheHosts(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 5, 0, time.UTC)
	body := Payload(Function{Name: "orders", Binding: "timer", Schedule: "*/5 * * * * *"}, time.Time{}, now.Add(5*time.Second), now, true)
	var p struct {
		Data map[string]struct {
			ScheduleStatus struct{ Last, Next string }
			IsPastDue      bool
		}
		Metadata struct{ Sys struct{ MethodName string } } `json:"Metadata"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	timer, ok := p.Data["timer"]
	if !ok || timer.ScheduleStatus.Last != "0001-01-01T00:00:00" || !timer.IsPastDue || timer.ScheduleStatus.Next != "2026-11-22T12:00:10Z" {
		t.Fatalf("%s", body)
	}
	if !strings.Contains(string(body), `"MethodName":"orders"`) {
		t.Fatalf("%s", body)
	}
}

// TestFailedLineIsOneShortLine: a long, multi-line error is one progress line, shortened, naming
// the log with the full text; a short one is shown whole.
func TestFailedLineIsOneShortLine(t *testing.T) {
	long := "tick: source orders: " + strings.Repeat("the reason goes on ", 30) + "\ncaused by:\n  more"
	line := FailedLine("12:00:00", "orders", Result{Status: 500, Error: long}, ".dev/handler.log")
	if strings.Contains(line, "\n") || len([]rune(line)) > FailedReasonMax+80 || !strings.HasSuffix(line, "… (the full error: .dev/handler.log)") {
		t.Fatalf("%d runes: %q", len([]rune(line)), line)
	}
	if !strings.HasPrefix(line, "12:00:00 orders       FAILED (500): tick: source orders: the reason") {
		t.Fatalf("%q", line)
	}
	short := FailedLine("12:00:00", "orders", Result{Status: 500, Error: "lease held"}, ".dev/handler.log")
	if short != "12:00:00 orders       FAILED (500): lease held" {
		t.Fatalf("%q", short)
	}
}
