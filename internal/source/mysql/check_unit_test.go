package mysql

import (
	"context"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestMySQLZoneRule: a DATETIME cursor stamped by the local clock is right only in a server
// whose zone is UTC all year; the zones are those readZone reads (a fixed offset, the system's
// zone with daylight saving time, one that is UTC in winter only, one the server cannot convert).
func TestMySQLZoneRule(t *testing.T) {
	local := []string{"INSERT by current_timestamp", "UPDATE by current_timestamp"}
	for _, c := range []struct {
		name string
		z    serverZone
		want setup.Verdict
		says []string
	}{
		{"UTC", serverZone{global: "SYSTEM", system: "UTC", ok: true}, setup.VerdictOK, nil},
		{"+00:00", serverZone{global: "+00:00", system: "CET", ok: true}, setup.VerdictOK, nil},
		{"-05:00", serverZone{global: "-05:00", system: "UTC", now: -300, least: -300, largest: -300, ok: true}, setup.VerdictProblem,
			[]string{"DATETIME column updated_at", "INSERT by current_timestamp, UPDATE by current_timestamp", `@@global.time_zone "-05:00"`, "UTC-5 h now",
				"never delivered", "UTC_TIMESTAMP(6)", "TIMESTAMP(6)", "time_zone='+00:00'"}},
		{"New York", serverZone{global: "SYSTEM", system: "EST", now: -300, least: -300, largest: -240, ok: true}, setup.VerdictProblem,
			[]string{`@@global.time_zone "SYSTEM", @@system_time_zone "EST"`, "UTC-5 h now, from UTC-5 to UTC-4 h over the year"}},
		{"London in winter", serverZone{global: "Europe/London", system: "UTC", now: 0, least: 0, largest: 60, ok: true}, setup.VerdictProblem,
			[]string{`"Europe/London"`, "UTC+0 h now, from UTC+0 to UTC+1 h over the year"}},
		{"Kolkata", serverZone{global: "+05:30", now: 330, least: 330, largest: 330, ok: true}, setup.VerdictProblem, []string{"UTC+5.5 h now"}},
		{"unknown", serverZone{global: "Mars/Olympus"}, setup.VerdictUnknown, []string{`"Mars/Olympus"`, "cannot say how far"}},
	} {
		v, why := zoneRule("updated_at", local, c.z)
		if v != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, v, why, c.want)
		}
		for _, s := range c.says {
			if !strings.Contains(why, s) {
				t.Errorf("%s: %q lacks %q", c.name, why, s)
			}
		}
	}
}

// TestMySQLStampFunc: what stamps a side, from a column default or a trigger's SET as the
// catalog shows them (MariaDB and MySQL 8 spell them differently), and which are local time.
func TestMySQLStampFunc(t *testing.T) {
	for in, want := range map[string]string{
		"current_timestamp(6)": "current_timestamp", "CURRENT_TIMESTAMP": "current_timestamp", "current_timestamp()": "current_timestamp",
		"(utc_timestamp(6))": "utc_timestamp", "utc_timestamp(6)": "utc_timestamp", " NOW(6)": "now", "now()": "now",
		"LOCALTIMESTAMP": "localtimestamp", "sysdate(6)": "sysdate", "LAST_INSERT_ID()": "last_insert_id", "@stamp": "", "": "",
	} {
		if got := stampFunc(in); got != want {
			t.Errorf("stampFunc(%q) = %q, want %q", in, got, want)
		}
	}
	for fn, want := range map[string]bool{"current_timestamp": true, "now": true, "localtime": true, "localtimestamp": true, "sysdate": true,
		"utc_timestamp": false, "last_insert_id": false, "": false} {
		if localClock(fn) != want {
			t.Errorf("localClock(%q) = %v", fn, !want)
		}
	}
}

// TestMySQLTriggerNote: the fix's triggers need SUPER only where binary logging is on and
// log_bin_trust_function_creators is OFF (MySQL 8's defaults; Azure sets it ON).
func TestMySQLTriggerNote(t *testing.T) {
	if n := triggerNote(true, false); !strings.Contains(n, "SUPER") || !strings.Contains(n, "ERROR 1419") ||
		!strings.Contains(n, "SET GLOBAL log_bin_trust_function_creators = ON") || !strings.Contains(n, "Azure") {
		t.Errorf("binary log on, not trusted: %q", n)
	}
	for _, c := range [][2]bool{{false, false}, {true, true}, {false, true}} {
		if n := triggerNote(c[0], c[1]); n != "" {
			t.Errorf("log_bin %v, trust %v: %q, want no note", c[0], c[1], n)
		}
	}
}

// TestMySQLReadZone reads the shared test server's zone without changing it: the server's
// default (SYSTEM on MariaDB here and on the workflow's MySQL 8) converts, through CONVERT_TZ
// to 'SYSTEM', in a session that runs in UTC.
func TestMySQLReadZone(t *testing.T) {
	db, err := Driver{}.Open(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	z, err := readZone(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if !z.ok || z.least > z.now || z.now > z.largest {
		t.Fatalf("zone %+v: want offsets the server converted", z)
	}
	t.Logf("the server's zone: %+v", z)
}
