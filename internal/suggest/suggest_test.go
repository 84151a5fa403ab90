package suggest_test

import (
	"strconv"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/suggest"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"orders", "orders", 0}, {"ORDERS", "orders", 0}, {"ordres", "orders", 2}, {"order", "orders", 1},
		{"BATCHSIZE", "BATCH_SIZE", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}} {
		if got := suggest.Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"orders", "invoices", "orders-eu"}
	for word, want := range map[string]string{
		"ordres": "orders", "order": "orders", "invoice": "invoices", "orders_eu": "orders-eu", "Orders": "orders",
		"customers": "", "o": "", "x": "",
	} {
		got, ok := suggest.Closest(word, names)
		if got != want || ok != (want != "") {
			t.Errorf("Closest(%q) = %q, %v; want %q", word, got, ok, want)
		}
	}
	// Two equally near: no guess.
	if got, ok := suggest.Closest("ab", []string{"aa", "bb"}); ok {
		t.Errorf("a tie chose %q", got)
	}
	if got := suggest.DidYouMean("ordres", names, strconv.Quote); got != ` (did you mean "orders"?)` {
		t.Errorf("DidYouMean: %q", got)
	}
	if got := suggest.DidYouMean("customers", names, strconv.Quote); got != "" {
		t.Errorf("DidYouMean without a near name: %q", got)
	}
}
