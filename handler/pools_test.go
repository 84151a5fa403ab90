package handler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestPollersShareOnePoolPerDatabase: 50 pollers on one PostgreSQL, their timers fired at once,
// hold at most the pool size's connections to it together (POLLER_DB_MAX_CONNECTIONS, default
// source.DefaultPoolSize), where a pool each would leave at least one connection per poller; a
// bad value fails every poller's invocations, naming the setting.
func TestPollersShareOnePoolPerDatabase(t *testing.T) {
	dsn := testenv.Postgres(t)
	admin := testenv.DB(t, "pgx", dsn)
	table := testenv.Name("pools_")
	if _, err := admin.Exec(`CREATE TABLE ` + table + ` (id BIGINT PRIMARY KEY, updated_at TIMESTAMPTZ NOT NULL DEFAULT now());
		CREATE INDEX ON ` + table + ` (updated_at, id);
		INSERT INTO ` + table + ` (id, updated_at) SELECT n, now() - interval '1 hour' + n * interval '1 ms' FROM generate_series(1, 500) n`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP TABLE " + table) })

	const n = 50
	for _, tc := range []struct {
		setting string
		want    int
	}{{"", source.DefaultPoolSize}, {"3", 3}} {
		t.Run("size="+fmt.Sprint(tc.want), func(t *testing.T) {
			app := testenv.Name("pt_") // the connections' application_name, to count them
			env := map[string]string{"POLLER_DB_MAX_CONNECTIONS": tc.setting}
			var pollers []*poller.Poller
			var mu sync.Mutex
			delivered := 0
			for i := range n {
				name := fmt.Sprintf("p%02d", i)
				pollers = append(pollers, poller.New(name, table, poller.TimestampPK, func(_ context.Context, b *poller.Batch[testRow]) error {
					mu.Lock()
					delivered += len(b.Rows)
					mu.Unlock()
					return nil
				}, poller.WithSettleLag(0)))
				p := strings.ToUpper(name)
				env[p+"_DB_DRIVER"], env[p+"_DB_CONNECTION"] = "postgres", testenv.WithParam(dsn, "application_name", app)
			}
			srv := httptest.NewServer(handler.NewForTest(t, handler.Options{
				Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
				Pollers: pollers,
			}, handler.Internals{Store: memstore.New(nil)}).Routes())
			defer srv.Close()
			var wg sync.WaitGroup
			codes := make([]int, n)
			for i := range n {
				wg.Go(func() {
					name := fmt.Sprintf("p%02d", i)
					resp, err := http.Post(srv.URL+"/"+name, "application/json", strings.NewReader(strings.Replace(body, `"good"`, `"`+name+`"`, 1)))
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					codes[i] = resp.StatusCode
				})
			}
			wg.Wait()
			for i, c := range codes {
				if c != http.StatusOK {
					t.Fatalf("p%02d answered %d", i, c)
				}
			}
			if delivered != n*500 {
				t.Fatalf("%d rows delivered, want %d", delivered, n*500)
			}
			var conns int
			if err := admin.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&conns); err != nil {
				t.Fatal(err)
			}
			if conns < 1 || conns > tc.want {
				t.Fatalf("%d pollers on one database hold %d connections; want 1 to %d (one pool for them all)", n, conns, tc.want)
			}
			t.Logf("%d pollers, %d rows each, timers fired at once: %d connections (pool size %d)", n, 500, conns, tc.want)
		})
	}

	t.Run("bad", func(t *testing.T) {
		env := map[string]string{"POLLER_DB_MAX_CONNECTIONS": "lots", "GOOD_DB_DRIVER": "postgres", "GOOD_DB_CONNECTION": dsn}
		srv := httptest.NewServer(handler.NewForTest(t, handler.Options{
			Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Pollers: []*poller.Poller{poller.New("good", table, poller.TimestampPK, func(context.Context, *poller.Batch[testRow]) error { return nil })},
		}, handler.Internals{Store: memstore.New(nil)}).Routes())
		defer srv.Close()
		code, m, _ := post(t, srv.URL+"/good", body)
		if code == http.StatusOK || !strings.Contains(fmt.Sprint(m), "POLLER_DB_MAX_CONNECTIONS") || !strings.Contains(fmt.Sprint(m), `"lots"`) {
			t.Fatalf("POLLER_DB_MAX_CONNECTIONS=lots: %d %v", code, m)
		}
	})
}
