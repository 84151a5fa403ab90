package e2e

import (
	"database/sql"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// BenchmarkHandlerStartup starts the handler binary 20 times per iteration and reports the median
// time from exec to the first answered GET / (the host's start-up probe), and the resident memory
// of an idle handler after a few idle ticks (targets: < 50 ms, < 40 MB).
func BenchmarkHandlerStartup(b *testing.B) {
	az := testenv.Azurite(b)
	db := filepath.Join(b.TempDir(), "orders.db")
	sdb, err := sql.Open("sqlite", db)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sdb.Exec(`CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	sdb.Close()
	env := []string{"PATH=" + os.Getenv("PATH"), "StateStorage=" + az, "POLLER_APP_NAME=" + testenv.Name("startup-"),
		"ORDERS_DB_DRIVER=sqlite", "ORDERS_DB_CONNECTION=" + db}
	var starts []time.Duration
	var rss []float64
	for b.Loop() {
		for i := range 20 {
			port := testenv.FreePort(b)
			cmd := exec.Command(binary)
			cmd.Env = append(env, "FUNCTIONS_CUSTOMHANDLER_PORT="+strconv.Itoa(port))
			url := "http://127.0.0.1:" + strconv.Itoa(port)
			t0 := time.Now()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			for {
				resp, err := http.Get(url + "/")
				if err == nil {
					resp.Body.Close()
					break
				}
				if time.Since(t0) > 10*time.Second {
					b.Fatal("no answer within 10 s")
				}
				time.Sleep(200 * time.Microsecond) // polling
			}
			starts = append(starts, time.Since(t0))
			if i == 0 {
				// An idle handler after a few idle ticks (source opened, state read).
				for range 5 {
					resp, err := http.Post(url+"/orders", "application/json", strings.NewReader(hostBody))
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("idle tick: %s", resp.Status)
					}
				}
				rss = append(rss, statusMB(b, cmd.Process.Pid, "VmRSS"))
			}
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
	}
	slices.Sort(starts)
	slices.Sort(rss)
	b.ReportMetric(float64(starts[len(starts)/2].Microseconds())/1000, "start-to-ready-p50-ms")
	b.ReportMetric(rss[len(rss)/2], "idle-rss-MB")
}
