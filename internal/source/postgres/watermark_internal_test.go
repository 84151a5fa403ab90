package postgres

import "testing"

func TestWidenXid(t *testing.T) {
	for _, c := range []struct {
		x    uint32
		ref  uint64
		want uint64
	}{
		{100, 200, 100},
		{4294967290, 1<<32 + 5, 4294967290},  // the epoch before ref's
		{5, 1<<32 - 10, 1<<32 + 5},           // the epoch after
		{4294967290, 4294967295, 4294967290}, // epoch 0, no wrap
		{7, 3<<32 + 9, 3<<32 + 7},            // same epoch
		{0x80000010, 0x10, 0x80000010},       // far, but epoch 0 cannot go back
	} {
		if got := widenXid(c.x, c.ref); got != c.want {
			t.Errorf("widenXid(%d, %d) = %d, want %d", c.x, c.ref, got, c.want)
		}
	}
}

func TestParseSnapshot(t *testing.T) {
	w, err := parseSnapshot("10:20:12,15")
	if err != nil || w.xmin != 10 || w.xmax != 20 || len(w.xip) != 2 || !w.xip[12] || !w.xip[15] {
		t.Fatalf("%+v, %v", w, err)
	}
	if w, err := parseSnapshot("10:10:"); err != nil || len(w.xip) != 0 {
		t.Fatalf("%+v, %v", w, err)
	}
	for _, bad := range []string{"", "1:2", "a:2:", "1:2:x"} {
		if _, err := parseSnapshot(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
