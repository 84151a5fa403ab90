package ctl

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/pseudotrigger/pseudotrigger/poller"
)

// modulePath is the Go module the scaffold imports from.
const modulePath = "github.com/pseudotrigger/pseudotrigger"

// scaffold writes pollers/NAME/ (a working poller and its test), NAME/function.json, and the
// import line in pollers/all/all.go, then prints the settings to add.
func scaffold(args []string, env Env) error {
	if len(args) != 1 {
		return usagef("new NAME")
	}
	name := args[0]
	if !poller.ValidName(name) {
		return usagef("%q is not a valid poller and function name: letters, digits, - and _, starting with a letter, at most 64", name)
	}
	if _, ok := env.definition(name); ok {
		return refusedf("a poller %q is already registered", name)
	}
	if strings.EqualFold(name, "status") {
		return refusedf("%q is the name of the status function (status/function.json): choose another", name)
	}
	root := env.Root
	if root == "" {
		return usagef("run pollerctl new from inside the repository (no go.mod for %s found)", modulePath)
	}
	pkgDir := filepath.Join(root, "pollers", name)
	fnDir := filepath.Join(root, name)
	for _, p := range []string{pkgDir, fnDir} {
		if _, err := os.Stat(p); err == nil {
			return refusedf("%s already exists: not overwritten", p)
		}
	}
	allPath := filepath.Join(root, "pollers", "all", "all.go")
	all, err := os.ReadFile(allPath)
	if err != nil {
		return fmt.Errorf("reading %s: %w", allPath, err)
	}
	line := fmt.Sprintf("\t_ %q // %s\n", modulePath+"/pollers/"+name, name)
	i := bytes.LastIndex(all, []byte("\n)"))
	if i < 0 || !bytes.Contains(all, []byte("import (")) {
		return errors.New(allPath + " has no import ( ... ) block to add the poller to")
	}
	newAll := append(append(append([]byte{}, all[:i+1]...), line...), all[i+1:]...)

	data := struct{ Name, Pkg, Prefix, Module string }{
		Name: name, Pkg: strings.ToLower(strings.ReplaceAll(name, "-", "_")), Prefix: poller.Prefix(name), Module: modulePath,
	}
	files := map[string]*template.Template{
		filepath.Join(pkgDir, data.Pkg+".go"):      pollerTemplate,
		filepath.Join(pkgDir, data.Pkg+"_test.go"): testTemplate,
		filepath.Join(fnDir, "function.json"):      functionTemplate,
	}
	rendered := map[string][]byte{}
	for path, tmpl := range files {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			return err
		}
		rendered[path] = b.Bytes()
	}
	// Write everything, or nothing: on a failure, remove what was written.
	var written []string
	undo := func() {
		for _, p := range written {
			os.Remove(p)
		}
		os.Remove(pkgDir)
		os.Remove(fnDir)
	}
	for _, dir := range []string{pkgDir, fnDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			undo()
			return err
		}
	}
	for path, content := range rendered {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			undo()
			return err
		}
		written = append(written, path)
	}
	if err := os.WriteFile(allPath, newAll, 0o644); err != nil {
		undo()
		return err
	}
	fmt.Fprintf(env.Out, `created pollers/%[1]s/%[2]s.go, pollers/%[1]s/%[2]s_test.go and %[1]s/function.json; registered in pollers/all/all.go.
Edit the source definition and the handler in pollers/%[1]s/%[2]s.go, then run its test:
  go test ./pollers/%[1]s/
Settings to add (local.settings.json "Values", and the function app's app settings):
  %[3]s_DB_DRIVER       sqlserver | postgres | sqlite
  %[3]s_DB_CONNECTION   the source database's connection string
  %[3]s_SCHEDULE        NCRONTAB with seconds, e.g. */30 * * * * *
optional: %[3]s_BATCH_SIZE, %[3]s_LEASE_TTL, %[3]s_HEARTBEAT_INTERVAL, %[3]s_TICK_BUDGET, %[3]s_CHECKPOINT_INTERVAL, %[3]s_SETTLE_LAG
`, name, data.Pkg, data.Prefix)
	return nil
}

var pollerTemplate = template.Must(template.New("poller").Parse(`// Package {{.Pkg}} is the {{.Name}} poller: edit its source definition and its handler.
package {{.Pkg}}

import (
	"context"
	"log/slog"

	"{{.Module}}/poller"
	"{{.Module}}/source"
	"{{.Module}}/state"
)

// Name is the poller's name: its folder, its function ({{.Name}}/function.json) and the prefix
// of its settings ({{.Prefix}}_...).
const Name = "{{.Name}}"

// Source is the table the poller reads: change the table, columns, cursor and key to yours.
var Source = source.Definition{
	Table:   source.Table{Name: "{{.Pkg}}"},
	Columns: []string{"id", "updated_at"},
	Cursor:  source.Cursor{Kind: state.KindTimestampPK, Column: "updated_at"},
	PK:      []string{"id"},
}

func init() {
	poller.Register(poller.Definition{
		Name:     Name,
		Source:   Source,
		Schedule: "*/30 * * * * *",
		Handler:  Handle,
	})
}

// Row is what the handler decodes each row into.
type Row struct {
	ID int64 ` + "`db:\"id\"`" + `
}

// Handle processes one batch. Delivery is at least once: make the effect idempotent on b.ID (or
// each row's key), and pass b.FencingToken to sinks that can refuse a stale writer. Returning an
// error leaves the batch uncommitted; it comes again with b.Attempt + 1.
func Handle(ctx context.Context, b *poller.Batch) error {
	for _, row := range b.Rows {
		var r Row
		if err := row.Decode(&r); err != nil {
			return err
		}
		_ = r // deliver r here
	}
	slog.Default().Info("{{.Name}} batch", "batch_id", b.ID, "rows", len(b.Rows), "attempt", b.Attempt)
	return nil
}
`))

var testTemplate = template.Must(template.New("test").Parse(`package {{.Pkg}}

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"{{.Module}}/lease"
	"{{.Module}}/poller"
	"{{.Module}}/source"
	"{{.Module}}/store/memstore"
	"{{.Module}}/tick"
)

// TestTick runs one real tick of the poller over an SQLite copy of its table and an in-memory
// state store: every row reaches the handler and the checkpoint ends on the last one.
func TestTick(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "source.db")
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(` + "`" + `CREATE TABLE {{.Pkg}} (id INTEGER PRIMARY KEY, updated_at TEXT NOT NULL);
		INSERT INTO {{.Pkg}} VALUES (1, '2026-01-01T00:00:00.000000Z'), (2, '2026-01-01T00:00:01.000000Z'), (3, '2026-01-01T00:00:02.000000Z')` + "`" + `); err != nil {
		t.Fatal(err)
	}
	def := Source
	def.SettleLag = source.NoSettleLag
	src, err := source.Open(ctx, source.Config{Poller: Name, Driver: source.SQLite, DSN: dsn, Definition: def})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	m, err := lease.New(memstore.New(nil), lease.Config{Poller: Name, Blob: "state/test/" + Name + ".json", Owner: "test/1", Fingerprint: src.Fingerprint()})
	if err != nil {
		t.Fatal(err)
	}
	delivered := 0
	r := &tick.Runner{
		Poller: poller.Definition{Name: Name, Source: def, Handler: func(ctx context.Context, b *poller.Batch) error {
			delivered += len(b.Rows)
			return Handle(ctx, b)
		}},
		Settings: poller.Settings{BatchSize: 2, LeaseTTL: lease.DefaultTTL, HeartbeatInterval: lease.DefaultTTL / 4, TickBudget: time.Minute},
		Lease:    m, Source: src,
	}
	sum, err := r.Tick(ctx, "test")
	if err != nil || sum.Outcome != tick.Committed || sum.Rows != 3 || delivered != 3 {
		t.Fatalf("tick: %+v, %v; %d rows delivered", sum, err, delivered)
	}
}
`))

var functionTemplate = template.Must(template.New("function").Parse(`{
  "bindings": [
    {
      "type": "timerTrigger",
      "direction": "in",
      "name": "timer",
      "schedule": "%{{.Prefix}}_SCHEDULE%",
      "runOnStartup": false,
      "useMonitor": true
    }
  ]
}
`))
