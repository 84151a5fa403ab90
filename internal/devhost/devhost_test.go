package devhost

import (
	"encoding/json"
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
	if len(fns) != 2 || fns[0] != (Function{"literal", "t", "0 * * * * *"}) || fns[1] != (Function{"orders", "timer", "*/5 * * * * *"}) {
		t.Fatalf("%+v", fns)
	}
	if _, err := Functions(root, map[string]string{}); err == nil || !strings.Contains(err.Error(), "ORDERS_SCHEDULE") {
		t.Fatalf("a missing setting: %v", err)
	}
	if _, err := Functions(root, map[string]string{"ORDERS_SCHEDULE": "every minute"}); err == nil {
		t.Fatal("an invalid schedule was accepted")
	}
}

func TestPayloadIsTheHosts(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 5, 0, time.UTC)
	body := Payload(Function{"orders", "timer", "*/5 * * * * *"}, time.Time{}, now.Add(5*time.Second), now, true)
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
