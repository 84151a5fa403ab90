package source

import (
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// A dialect is what one database and its driver do their own way. Each is a file of its own
// (dialect_*.go); Open picks it from dialects by Config.Driver, and the rest of the package asks
// it instead of naming a database. Another database is another file, its entry in dialects, and
// a run of the conformance suite (package sourcetest) against it.
type dialect interface {
	open(dsn string) (*sql.DB, error)      // the connection pool for a DSN (not yet connected)
	location(dsn string) (Location, error) // the server and database in a DSN
	supports(kind string) bool             // whether a cursor of kind can be read here
	caseless() bool                        // whether column names match whatever their case
	quote(ident string) string
	placeholder(i int) string         // the i-th (1-based) parameter marker
	limit(sel, rest, n string) string // "SELECT " + sel + rest, reading at most n rows
	// keyset renders "the keys are after the params" in lexicographic order, for a cursor of kind.
	keyset(kind string, keys, params []string) string
	// keysetArgs is, for a dialect whose markers are positional and whose keyset repeats them,
	// which key value each marker of the keyset takes, in order; nil when each takes its own.
	keysetArgs(n int) []int
	// upperBound renders the predicate on the cursor column col that keeps a read behind rows
	// that may still commit (lag: the settle lag) and its argument, whose marker next gives;
	// "", nil when the kind has no bound.
	upperBound(kind string, fl tsFlavor, col string, lag time.Duration, next func() string) (string, any)
	// stampCheck renders the predicate that finds a row the cursor column col (of flavor fl) can
	// never reach, its argument (marker param), and how to stamp the column and rewrite such
	// rows; "" when there is nothing to check (see CheckStamps).
	stampCheck(fl tsFlavor, table, col, param string) (pred string, arg any, fix string)
	// classify maps a column's type (DatabaseTypeName, SQLite: the declared type; upper case,
	// without its size) to a class, and for timestamps how they compare with the database's clock.
	classify(base string) (class, tsFlavor)
	scalars() bool                       // whether integers, floats and text come as int64, float64, string
	uuid(b []byte) (string, error)       // canonical text of a UUID the driver returned as bytes
	keyCodec(c *column) (keyCodec, bool) // the dialect's own codec for a key column, if it has one
}

// dialects by driver name.
var dialects = map[string]dialect{SQLServer: sqlServer{}, Postgres: postgres{}, SQLite: sqlite{}, MySQL: mysqlDialect{}}

// Drivers lists the driver names, sorted.
func Drivers() []string {
	out := make([]string, 0, len(dialects))
	for d := range dialects {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// common is what a dialect does unless it says otherwise: double-quoted identifiers, row-value
// comparison, LIMIT, the cursor kinds every database has, and a driver returning plain values.
type common struct{}

func (common) quote(s string) string            { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func (common) limit(sel, rest, n string) string { return "SELECT " + sel + rest + " LIMIT " + n }

// keyset compares row values, which PostgreSQL's and SQLite's indexes seek on.
func (common) keyset(_ string, keys, params []string) string {
	if len(keys) == 1 {
		return keys[0] + " > " + params[0]
	}
	return "(" + strings.Join(keys, ", ") + ") > (" + strings.Join(params, ", ") + ")"
}

func (common) keysetArgs(int) []int { return nil }

// expandedKeyset is the keyset in the form without row comparison, with a leading range on the
// first key so that an index on the keys is read as a range:
// k0 >= p0 AND (k0 > p0 OR (k1 > p1 OR (k1 = p1 AND k2 > p2))).
func expandedKeyset(keys, params []string) string {
	last := len(keys) - 1
	rest := keys[last] + " > " + params[last]
	if last == 0 {
		return rest
	}
	for i := last - 1; i >= 1; i-- {
		rest = "(" + keys[i] + " > " + params[i] + " OR (" + keys[i] + " = " + params[i] + " AND " + rest + "))"
	}
	return keys[0] + " >= " + params[0] + " AND (" + keys[0] + " > " + params[0] + " OR " + rest + ")"
}

// expandedKeysetArgs is the order of the key values in expandedKeyset's markers: 0, 0, then
// each middle key twice, then the last once (one key: just 0).
func expandedKeysetArgs(n int) []int {
	if n == 1 {
		return []int{0}
	}
	out := []int{0, 0}
	for i := 1; i < n-1; i++ {
		out = append(out, i, i)
	}
	return append(out, n-1)
}

func (common) supports(kind string) bool {
	return kind == state.KindTimestampPK || kind == state.KindInteger
}

func (common) scalars() bool                 { return true }
func (common) uuid(b []byte) (string, error) { return string(b), nil }
