package handler_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/handler"
	"github.com/pseudotrigger/pseudotrigger/internal/store/memstore"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// TestMisspeltSettingLogged: at start-up the handler warns of a setting that looks like a
// poller's but is none, naming the one meant.
func TestMisspeltSettingLogged(t *testing.T) {
	env := map[string]string{"GOOD_DB_DRIVER": "sqlite", "GOOD_DB_CONNECTION": "x.db", "GOOD_BATCHSIZE": "10", "GOD_SCHEDULE": "*/5 * * * * *"}
	logs := &testenv.Buffer{}
	handler.NewForTest(t, handler.Options{
		Getenv: func(k string) string { return env[k] },
		Environ: func() []string {
			var keys []string
			for k := range env {
				keys = append(keys, k)
			}
			return keys
		},
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Pollers: []*poller.Poller{def("good", new(int))},
	}, handler.Internals{Store: memstore.New(nil)})
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, `"setting not used: `) {
			got = append(got, l)
		}
	}
	if len(got) != 2 || !strings.Contains(got[0], `GOD_SCHEDULE is set, but no poller's settings start with GOD_: did you mean GOOD_SCHEDULE?","setting":"GOD_SCHEDULE"`) ||
		!strings.Contains(got[1], `GOOD_BATCHSIZE is not a setting: did you mean GOOD_BATCH_SIZE?","setting":"GOOD_BATCHSIZE"`) || !strings.Contains(got[0], `"level":"WARN"`) {
		t.Fatalf("the warnings:\n%s", strings.Join(got, "\n"))
	}
}
