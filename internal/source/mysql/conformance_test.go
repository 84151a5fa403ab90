package mysql_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source/mysql"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcetest"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TestConformanceMySQL runs the suite on the MariaDB scripts/test.sh starts (MySQL 8 in the
// GitHub workflow). The harness's own connection writes times as UTC, as the source reads them.
func TestConformanceMySQL(t *testing.T) {
	dsn := testenv.MySQL(t)
	sourcetest.Run(t, sourcetest.Harness{Driver: mysql.Driver{}, DSN: dsn, DB: sourcetest.DB(t, "mysql", dsn+"?parseTime=true&loc=UTC&time_zone=%27%2B00%3A00%27"), Fixture: fixture})
}

// fixture is MySQL's and MariaDB's side of the conformance suite: orders stamped in DATETIME(6),
// no cursor kind in commit order, a UUID kept in BINARY(16), and the hazard of a DATETIME
// stamped in local time east of UTC.
var fixture = sourcetest.Fixture{
	Orders: func(name string) []string {
		return []string{
			`CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, customer VARCHAR(100) NOT NULL, amount DECIMAL(12,2) NOT NULL,
			  updated_at DATETIME(6) NOT NULL, KEY ix_ts (updated_at, id))`,
		}
	},
	ConcurrentWriters: true,
	Values: &sourcetest.Values{
		Table: "mysql",
		Server: func(t testing.TB, db *sql.DB) string {
			if mariaDB(t, db) {
				return "mariadb"
			}
			return "mysql8"
		},
		// Zero dates and dates with a zero part, which older schemas hold.
		Session: []string{"SET SESSION sql_mode = ''"},
		Same:    func(_, a, b string) string { return a + " <=> " + b },
		// go-sql-driver writes the zero time.Time (0001-01-01) as 0000-00-00: a time goes as text.
		Arg: func(v any) any {
			if t, ok := v.(time.Time); ok {
				return t.Format("2006-01-02 15:04:05.999999")
			}
			return v
		},
	},
	Stamp:  "DATETIME(6)",
	Schema: database,
	Types:  typesTable,
	FutureStamps: &sourcetest.FutureStamps{
		Ahead: func(n int, unit string) string {
			return fmt.Sprintf("UTC_TIMESTAMP(6) + INTERVAL %d %s", n, strings.ToUpper(unit))
		},
		Fix: func(table string) string {
			return "UPDATE `" + table + "` SET `updated_at` = UTC_TIMESTAMP(6) WHERE `updated_at` > UTC_TIMESTAMP(6) + INTERVAL 10 MINUTE"
		},
	},
}

// typesTable is the suite's types table with the list: DECIMAL(38,10), DATETIME(6) (the
// cursor), TIMESTAMP(6), JSON, BINARY(16), VARBINARY, utf8mb4 text with an emoji, NULL, BIGINT
// UNSIGNED near its maximum (a JSON number, exact), next to the columns every driver has. A UUID
// kept in BINARY(16) decodes as its 16 bytes.
//
// JSON is the value itself on both servers ({"a":[1,2]}, as encoding/json writes it): MySQL 8's
// JSON type, which go-sql-driver reports as JSON, and MariaDB's, an alias of LONGTEXT with a
// json_valid CHECK that the driver reports as TEXT, which the driver's ColumnTypes finds.
func typesTable(t testing.TB, db *sql.DB, name string, ts time.Time) sourcetest.TypesTable {
	j := `{"a":[1,2]}`
	return sourcetest.TypesTable{
		DDL: `CREATE TABLE ` + name + ` (id BIGINT PRIMARY KEY, d DECIMAL(12,2), big DECIMAL(38,10), ts DATETIME(6) NOT NULL, bin BINARY(4), u BINARY(16), j JSON, n INT, t VARCHAR(100) CHARACTER SET utf8mb4, f DOUBLE, b BOOLEAN, i4 INT, i2 SMALLINT, r FLOAT,
		  tz TIMESTAMP(6) NULL, vb VARBINARY(32), ub BIGINT UNSIGNED, KEY (ts, id))`,
		Insert: `INSERT INTO ` + name + ` VALUES (1, 12.50, 1234567890123456789012345678.0123456789, ?, x'deadbeef', x'a0eebc999c0b4ef8bb6d6bb9bd380a11', '{"a": [1, 2]}', NULL, 'grüße "q" 😀', 1.5, true, 7, 3, 0.25,
		  ?, x'00ff10', 18446744073709551610)`,
		Args: []any{ts, typesTZ},
		TS:   ts,
		More: []string{"tz", "vb", "ub"},
		JSON: `{"id":1,"d":"12.50","big":"1234567890123456789012345678.0123456789","ts":"2026-04-07T01:23:45.123456Z","bin":"3q2+7w==","u":"oO68mZwLTvi7bWu5vTgKEQ==","j":` + j + `,"n":null,"t":"grüße \"q\" 😀","f":1.5,"b":1,"i4":7,"i2":3,"r":0.25,` +
			`"tz":"2026-11-23T23:59:59.000001Z","vb":"AP8Q","ub":18446744073709551610}`,
		UUID:  "\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11",
		Text:  `grüße "q" 😀`,
		Check: checkTypes,
	}
}

// typesTZ is the TIMESTAMP(6) of the types row: a microsecond past a day's last second.
var typesTZ = time.Date(2026, 11, 23, 23, 59, 59, 1000, time.UTC)

// checkTypes decodes the MySQL-only columns of the types row: TIMESTAMP(6) at full precision,
// VARBINARY's bytes, BIGINT UNSIGNED near its maximum into uint64, string and float64 exactly
// (and into int64: an overflow error, not a wrapped number), DECIMAL(38,10) as its digits, JSON
// into a json.RawMessage as the server keeps its text (both: {"a": [1, 2]}).
func checkTypes(t *testing.T, row row.Row) {
	var dst struct {
		TZ     time.Time       `db:"tz"`
		VB     []byte          `db:"vb"`
		UB     uint64          `db:"ub"`
		UBText string          `db:"ub"`
		UBF    float64         `db:"ub"`
		Big    string          `db:"big"`
		J      json.RawMessage `db:"j"`
		T      string          `db:"t"`
	}
	if err := row.Decode(&dst); err != nil {
		t.Fatal(err)
	}
	if !dst.TZ.Equal(typesTZ) || dst.TZ.Location() != time.UTC || string(dst.VB) != "\x00\xff\x10" ||
		dst.UB != 18446744073709551610 || dst.UBText != "18446744073709551610" || dst.UBF != 18446744073709551610 ||
		dst.Big != "1234567890123456789012345678.0123456789" || string(dst.J) != `{"a": [1, 2]}` || dst.T != "grüße \"q\" 😀" {
		t.Fatalf("decoded %+v", dst)
	}
	var signed struct {
		UB int64 `db:"ub"`
	}
	if err := row.Decode(&signed); err == nil || !strings.Contains(err.Error(), "overflows int64") {
		t.Fatalf("BIGINT UNSIGNED 18446744073709551610 into an int64: %d, %v; want an overflow error", signed.UB, err)
	}
}

// mariaDB reports whether the server of db is MariaDB (not MySQL).
func mariaDB(t testing.TB, db *sql.DB) bool {
	t.Helper()
	var v string
	if err := db.QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(strings.ToLower(v), "mariadb")
}

// database is the test connection's database: the schema its tables are in.
func database(t testing.TB, db *sql.DB) string {
	t.Helper()
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}
