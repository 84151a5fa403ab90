package blobpath_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/blobpath"
)

// TestLayout: each name is the layout the package comment draws, and a prefix is the start of
// the names under it (what a listing by prefix finds).
func TestLayout(t *testing.T) {
	at := time.Date(2026, 11, 28, 23, 30, 15, 123456789, time.FixedZone("CET", 3600))
	for _, c := range []struct{ got, want, prefix string }{
		{blobpath.State("prod", "orders"), "state/prod/orders.json", blobpath.StatePrefix("prod")},
		{blobpath.StatePrefix("prod"), "state/prod/", blobpath.StateRoot},
		{blobpath.TombstoneOf(blobpath.State("prod", "orders")), "tombstones/prod/orders.json", blobpath.TombstoneRoot},
		{blobpath.Backup("prod", "orders", "", at), "backups/prod/orders/20261128T223015.123456789Z.json", blobpath.Backups("prod", "orders")},
		{blobpath.Backup("prod", "orders", "deadletter-", at), "backups/prod/orders/deadletter-20261128T223015.123456789Z.json", blobpath.Backups("prod", "orders")},
		{blobpath.DeadLetter("prod", "orders", "b1"), "deadletter/prod/orders/b1.json", blobpath.DeadLetters("prod", "orders")},
		{blobpath.Liveness("prod", "orders"), "liveness/prod/orders.json", blobpath.LivenessPrefix("prod")},
	} {
		if c.got != c.want || !strings.HasPrefix(c.got, c.prefix) {
			t.Errorf("%s, want %s under %s", c.got, c.want, c.prefix)
		}
	}
	// Backups sort as their times do.
	if a, b := blobpath.Backup("p", "o", "", at), blobpath.Backup("p", "o", "", at.Add(time.Nanosecond)); a >= b {
		t.Errorf("%s sorts after %s", a, b)
	}
}
