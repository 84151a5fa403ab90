// Command devhost runs the custom handler locally the way the Functions host would, firing every
// timer function on its schedule (see package devhost). scripts/dev.sh is the usual way in.
//
//	devhost [-settings local.settings.json] [-example local.settings.json.example] [-handler bin/handler] [-root DIR] [-write-orders] [-writer-only] [-create-orders]
//
// A function whose schedule setting is missing is named with the setting and left out, as the
// Functions host does; the others run.
// Settings are local.settings.json's Values with the environment winning for any key both set,
// as with Core Tools; keys the example sets and local.settings.json lacks (a file made before a
// poller was added) are named, and the example's values are used for this run. For a declared
// poller whose sink is a storage queue, each progress line ends with the queue's depth.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
	"github.com/pseudotrigger/pseudotrigger/internal/devhost"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerdef"
	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/version"
	"github.com/pseudotrigger/pseudotrigger/pollers/orders"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("devhost", version.String())
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devhost:", err)
		os.Exit(1)
	}
}

func run() error {
	settingsPath := flag.String("settings", "local.settings.json", "the local settings file")
	examplePath := flag.String("example", "local.settings.json.example", "the settings file's example: keys it sets and the settings file lacks are named and taken from it")
	handlerPath := flag.String("handler", "bin/handler", "the custom handler binary")
	writeOrders := flag.Bool("write-orders", false, "keep inserting and updating rows in the orders table of ORDERS_DB_CONNECTION (ORDERS_DB_DRIVER sqlite or mysql)")
	writerOnly := flag.Bool("writer-only", false, "only write orders (when func start fires the timers)")
	createOnly := flag.Bool("create-orders", false, "create the orders table of ORDERS_DB_CONNECTION when it is missing, and exit")
	appRoot := flag.String("root", ".", "the app's root: its */function.json folders and declared pollers' poller.json (AzureWebJobsScriptRoot)")
	flag.Parse()

	values, err := devhost.LoadSettings(*settingsPath)
	if err != nil {
		return err
	}
	if example, err := devhost.LoadSettings(*examplePath); err == nil {
		if missing := devhost.Missing(values, example); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "devhost: %s lacks %s, which %s sets (it was made before they were added): copy them into %s",
				*settingsPath, strings.Join(missing, ", "), *examplePath, *settingsPath)
			if *writerOnly {
				fmt.Fprintln(os.Stderr, "; func start reads only that file, so the functions needing them fail until then")
			} else {
				fmt.Fprintln(os.Stderr, "; this run uses the example's values")
			}
			for _, k := range missing {
				values[k] = example[k]
			}
		}
	}
	devhost.Overlay(values, os.LookupEnv) // the environment wins, as with Core Tools
	// SIGHUP (the terminal went) and SIGPIPE (the reader of our output went: dev.sh | head) stop
	// the run as Ctrl-C does, the handler first; without them a write to a closed pipe would kill
	// devhost and leave the handler running.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer stop()

	var writer *devhost.Writer
	var wg sync.WaitGroup
	if *writeOrders || *writerOnly || *createOnly {
		// The example poller's own settings, read as the handler reads them.
		s, _ := appsettings.Load(pollerdef.Of(orders.New()), func(k string) string { return values[k] })
		driver, dsn := s.Driver, s.DSN
		var (
			db     *sql.DB
			layout string
		)
		switch driver {
		case "sqlite":
			if err := os.MkdirAll(filepath.Dir(strings.SplitN(dsn, "?", 2)[0]), 0o755); err != nil {
				return err
			}
			db, err = sql.Open("sqlite", dsn)
		case "mysql":
			// A MySQL or MariaDB of the developer's (scripts/dev.sh with DEV_DRIVER=mysql): the
			// writer signs in with the DSN's password; Entra ID's fedauth is the poller's only.
			if strings.Contains(strings.ToLower(dsn), "fedauth=") {
				return errors.New("-write-orders writes with a password: ORDERS_DB_CONNECTION's fedauth (Entra ID) is for the poller; point it at a MySQL with a password user for local runs")
			}
			db, err = sql.Open("mysql", dsn)
			layout = devhost.MySQLTimeLayout
		case "postgres":
			// The PostgreSQL dev.sh starts (DEV_DRIVER=postgres), or one of the developer's.
			db, err = sql.Open("pgx", dsn)
		default:
			return errors.New("-write-orders needs ORDERS_DB_DRIVER=sqlite, mysql or postgres in " + *settingsPath + " (or the environment)")
		}
		if err != nil {
			return err
		}
		defer db.Close()
		if err := devhost.CreateOrdersFor(ctx, db, driver); err != nil {
			return fmt.Errorf("creating the orders table: %w", redactedErr(err))
		}
		if *createOnly {
			fmt.Printf("the orders table is in %s %s\n", driver, redact.DSN(dsn))
			return nil
		}
		writer = &devhost.Writer{DB: db, Layout: layout, Dollar: driver == "postgres"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := writer.Run(ctx, 250*time.Millisecond, 20); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "devhost: orders writer:", redactedErr(err))
				stop()
			}
		}()
		fmt.Printf("writing orders to %s %s (20 every 250 ms, and one update)\n", driver, redact.DSN(dsn))
	}
	if *writerOnly {
		<-ctx.Done()
		wg.Wait()
		return nil
	}

	// As under the Functions host, a schedule's %SETTING% may come from the environment alone.
	settings := maps.Clone(values)
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, set := settings[k]; !set {
				settings[k] = v
			}
		}
	}
	all, err := devhost.Functions(*appRoot, settings)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return errors.New("no */function.json with a timerTrigger found in " + *appRoot)
	}
	// A function without a usable schedule is left out, named with the setting; the others run.
	var fns []devhost.Function
	for _, fn := range all {
		if fn.Err != nil {
			fmt.Fprintf(os.Stderr, "devhost: %s is not run: %v\n", fn.Name, fn.Err)
			continue
		}
		fns = append(fns, fn)
	}
	if len(fns) == 0 {
		return errors.New("no timer function has a schedule: see the lines above")
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := filepath.Abs(*appRoot)
	if err != nil {
		return err
	}
	// The handler runs in the working directory (relative SQLite paths), and finds the declared
	// pollers' poller.json in the app's root (AzureWebJobsScriptRoot), as under the Functions host.
	h := exec.Command(*handlerPath)
	h.Dir = cwd
	h.Env = os.Environ()
	if _, ok := values["AzureWebJobsScriptRoot"]; !ok && os.Getenv("AzureWebJobsScriptRoot") == "" {
		h.Env = append(h.Env, "AzureWebJobsScriptRoot="+root)
	}
	for k, v := range values {
		h.Env = append(h.Env, k+"="+v)
	}
	h.Env = append(h.Env, "FUNCTIONS_CUSTOMHANDLER_PORT="+strconv.Itoa(port))
	logPath := filepath.Join(".dev", "handler.log")
	_ = os.MkdirAll(".dev", 0o755)
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	h.Stdout, h.Stderr = logFile, logFile
	if err := h.Start(); err != nil {
		return fmt.Errorf("starting %s (run scripts/build.sh first): %w", *handlerPath, err)
	}
	// The handler's end, whenever it comes: asked for (Ctrl-C), or not (it crashed, or was
	// killed), which stops the run, saying so, rather than failing every tick from then on.
	exited := make(chan error, 1)
	go func() { exited <- h.Wait() }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitReady(ctx, base, h, exited, logPath); err != nil {
		return err
	}
	fmt.Printf("handler on %s (its JSON log: %s); timers: ", base, logPath)
	for i, fn := range fns {
		if i > 0 {
			fmt.Print(", ")
		}
		fmt.Printf("%s %q", fn.Name, fn.Schedule)
	}
	fmt.Printf("\nstatus page: %s/api/status?format=html (JSON without ?format=html)\nCtrl-C stops everything.\n", base)

	var totals sync.Map // function -> rows delivered
	for _, fn := range fns {
		q, err := devhost.StorageQueues(root, fn.Name, settings)
		if err != nil {
			fmt.Fprintf(os.Stderr, "devhost: %s: the queues' depths are not shown: %v\n", fn.Name, err)
		}
		for _, q := range q {
			fmt.Printf("%s sends to queue %s at %s\n", fn.Name, q.Name, q.URL())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fire(ctx, base, fn, writer, q, &totals, logPath)
		}()
	}
	var died error
	select {
	case <-ctx.Done():
		fmt.Println("\nstopping ...")
		_ = h.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = h.Process.Kill()
		}
	case err := <-exited:
		died = fmt.Errorf("the handler (%s, pid %d) stopped: %s; its log: %s. The timers stop with it", *handlerPath, h.Process.Pid, ended(err), logPath)
		stop()
	}
	wg.Wait()
	return died
}

// ended says how a process that Wait returned err for ended.
func ended(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error() // "signal: killed", "exit status 2"
}

func fire(ctx context.Context, base string, fn devhost.Function, writer *devhost.Writer, q []*devhost.Queue, totals *sync.Map, logPath string) {
	sched, _ := appsettings.ParseSchedule(fn.Schedule)
	var last time.Time
	for {
		now := time.Now()
		next := sched.Next(now)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		fired := time.Now()
		body := devhost.Payload(fn, last, sched.Next(fired), fired, fired.Sub(next) > time.Second)
		r := devhost.Invoke(ctx, base, fn, body)
		last = fired
		if ctx.Err() != nil {
			return
		}
		progress(ctx, fn, r, writer, q, totals, logPath)
	}
}

func progress(ctx context.Context, fn devhost.Function, r devhost.Result, writer *devhost.Writer, q []*devhost.Queue, totals *sync.Map, logPath string) {
	stamp := time.Now().Format("15:04:05")
	if r.Status != http.StatusOK {
		fmt.Println(devhost.FailedLine(stamp, fn.Name, r, logPath))
		return
	}
	s := r.Summary
	rows := int64(num(s["rows"]))
	var total int64
	v, _ := totals.LoadOrStore(fn.Name, new(int64))
	p := v.(*int64)
	*p += rows
	total = *p
	line := fmt.Sprintf("%s %-12s %-10s rows %5d  batches %3d  token %3d  delivered %7d  %s", stamp, fn.Name, s["outcome"], rows,
		int(num(s["batches"])), int(num(s["fencing_token"])), total, backlogText(s))
	line += followText(s)
	// A MySQL poller held back by an open transaction, or bounded by the settle lag alone, says so.
	if b, _ := s["late_commit_bound"].(string); b != "" && b != "open transactions (none open)" {
		line += "  late commits: " + b
	}
	if writer != nil && fn.Name == "orders" {
		n, _ := writer.Newest()
		line += fmt.Sprintf("  (%d orders written)", n)
	}
	for _, q := range q { // one GetProperties a queue a line
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		line += "  " + q.Depth(qctx)
		cancel()
	}
	fmt.Println(line)
}

// followText says what a tick that followed ({P}_FOLLOW) did once it had caught up: for how long
// (its follow time's rest), the changes it delivered meanwhile and their commit-to-delivery
// latency; "" for a tick that did not follow.
func followText(s map[string]any) string {
	f, ok := s["follow"].(map[string]any)
	if !ok {
		return ""
	}
	since, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(f["since"]))
	until, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(f["until"]))
	text := fmt.Sprintf("  followed %s: %d changes", until.Sub(since).Round(100*time.Millisecond), int64(num(f["changes"])))
	if p50, ok := f["latency_p50_ms"]; ok {
		return text + fmt.Sprintf(", commit to delivery p50 %.0f ms, p95 %.0f ms", num(p50), num(f["latency_p95_ms"]))
	}
	return text
}

// backlogText is what waits as the tick measured it at its end, in the status page's words
// (pollerstatus.Backlog), and labelled so: the page's "measured now" is read later, and counts
// the rows written since.
func backlogText(s map[string]any) string {
	b := pollerstatus.Backlog{RowsWaiting: -1}
	if v, ok := s["rows_waiting"]; ok {
		b.RowsWaiting = int64(num(v))
	}
	if v, ok := s["lag_seconds"]; ok && v != nil {
		lag := num(v)
		b.LagSeconds = &lag
	}
	if c, ok := s["cursor"].(map[string]any); ok {
		b.CursorKind, _ = c["kind"].(string)
	}
	return pollerstatus.MeasuredAtTickEnd + ": waiting " + b.WaitingText() + ", lag " + b.LagText()
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case json.Number:
		f, _ := x.Float64()
		return f
	}
	return 0
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits up to 20 s for the handler to answer GET /, as the host's start-up probe
// does; a handler that exits meanwhile (exited) is said at once.
func waitReady(ctx context.Context, base string, h *exec.Cmd, exited <-chan error, logPath string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			return fmt.Errorf("the handler (%s) exited during start-up: %s; see %s", h.Path, ended(err), logPath)
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = h.Process.Kill()
	return errors.New("the handler did not answer GET / within 20 s: see " + logPath)
}

// redactedErr hides what looks like a secret (a DSN's password) in a driver's error.
func redactedErr(err error) error { return errors.New(redact.Text(err.Error())) }
