package source

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

func TestParseLocation(t *testing.T) {
	cases := []struct {
		driver, dsn string
		want        Location
	}{
		{Postgres, "postgres://u:p@Host.Example:5433/shop?sslmode=require", Location{"host.example:5433", "shop"}},
		{Postgres, "host=h1 port=5432 dbname=db1 user=u password=secret", Location{"h1:5432", "db1"}},
	}
	for _, c := range cases {
		got, err := Builtin().Location(c.driver, c.dsn)
		if err != nil || got != c.want {
			t.Errorf("%s %s: got %+v, %v; want %+v", c.driver, c.dsn, got, err, c.want)
		}
	}
	if _, err := Builtin().Location(Postgres, "postgres://u:hunter2@[::1"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad DSN: %v", err)
	}
}

func TestConnectFailureNamesPollerWithoutSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, Builtin(), Config{Poller: "orders", Driver: Postgres, DSN: "postgres://app:hunter2@127.0.0.1:1/shop?sslmode=disable&connect_timeout=5",
		Definition: Definition{Table: Table{Name: "orders"}, Cursor: Cursor{Kind: state.KindInteger, Column: "id"}, PK: []string{"id"}}})
	if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), `poller "orders"`) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("connect failure: %v", err)
	}
}

func TestCursorJSONStable(t *testing.T) {
	// A cursor written by one build must read the same in the next: pin the encoding.
	c := newColumn(byName(Postgres), "c", "INT8")
	codec, _ := codecFor(&c)
	raw, _ := codec.Encode(int64(9007199254740993))
	if string(raw) != "9007199254740993" {
		t.Fatalf("int64 beyond 2^53: %s", raw)
	}
	var v json.RawMessage = raw
	back, err := codec.Decode(v)
	if err != nil || back.(int64) != 9007199254740993 {
		t.Fatalf("Decode: %v %v", back, err)
	}
}

func TestFormatScaled(t *testing.T) {
	fs := []float64{0, 12.5, -12.5, 0.05, -0.05, 1e-9, 123456789.125, 99999.995, 1e15, 1e20, -3, 0.1 + 0.2, 1.005, 2.675}
	for i := range 20000 {
		fs = append(fs, float64(i)/100, float64(i)/1000+0.0005, -float64(i)*1.37/100)
	}
	for _, f := range fs {
		for scale := -1; scale <= 10; scale++ {
			want := strconv.FormatFloat(f, 'f', scale, 64)
			if strings.Trim(want, "-0.") == "" {
				want = strings.TrimPrefix(want, "-") // a decimal has no negative zero
			}
			if got := formatScaled(f, scale); got != want {
				t.Errorf("formatScaled(%v, %d) = %s, strconv says %s", f, scale, got, want)
			}
		}
	}
}

// byName is the built-in driver of that name.
func byName(name string) Driver {
	d, ok := Builtin().Lookup(name)
	if !ok {
		panic("no driver " + name)
	}
	return d
}
