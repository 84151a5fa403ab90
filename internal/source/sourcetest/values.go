package sourcetest

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// TypesPage is the page whose tables say, for each database, the JSON form of every type's
// values (docs/types.md): the suite's testValues reads its database's table from it, so the page
// cannot drift from the code.
const TypesPage = "docs/types.md"

// A ValueCase is one row of a database's table on TypesPage: a value of a type, as SQL writes it,
// and its JSON form in a row's JSON (what every sink sends).
type ValueCase struct {
	Line  int    // the row's line on the page
	Type  string // the column's type, as DDL writes it
	Value string // the value, as SQL writes it
	JSON  string // its JSON form; "s"×N stands for a string of N times s
}

var (
	typesMarker = regexp.MustCompile(`^<!-- types: ([a-z0-9]+) -->$`)
	repeated    = regexp.MustCompile(`^"(.*)"×(\d+)$`)
)

// ReadTypesPage reads the table of each database on the page at path: each table follows a line
// <!-- types: DATABASE -->, and its rows are | `type` | `value` | `json` | notes |.
func ReadTypesPage(path string) (map[string][]ValueCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]ValueCase{}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		m := typesMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		db := m[1]
		if _, dup := out[db]; dup {
			return nil, fmt.Errorf("%s:%d: a second table for %s", path, i+1, db)
		}
		i++
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i], "|") || !strings.HasPrefix(lines[i+1], "|--") {
			return nil, fmt.Errorf("%s:%d: the table for %s must follow its marker at once, with a header", path, i+1, db)
		}
		for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
			cells := splitRow(lines[i])
			if len(cells) < 3 {
				return nil, fmt.Errorf("%s:%d: a row needs | `type` | `value` | `json` |", path, i+1)
			}
			c := ValueCase{Line: i + 1}
			for j, dst := range []*string{&c.Type, &c.Value, &c.JSON} {
				cell := cells[j]
				if len(cell) < 2 || cell[0] != '`' || cell[len(cell)-1] != '`' {
					return nil, fmt.Errorf("%s:%d: cell %d (%s) must be one `code span`", path, i+1, j+1, cell)
				}
				*dst = strings.ReplaceAll(cell[1:len(cell)-1], `\|`, "|")
			}
			if _, err := c.want(); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
			out[db] = append(out[db], c)
		}
		if len(out[db]) == 0 {
			return nil, fmt.Errorf("%s: the table for %s has no rows", path, db)
		}
	}
	return out, nil
}

// splitRow splits a table row into its cells, at the bars not escaped with a backslash.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteString(`\|`)
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		cells = append(cells, s)
	}
	return cells
}

// want is the JSON the case's value must have, compacted: "s"×N expanded.
func (c ValueCase) want() (string, error) {
	j := c.JSON
	if m := repeated.FindStringSubmatch(j); m != nil {
		var s string
		if err := json.Unmarshal([]byte(`"`+m[1]+`"`), &s); err != nil {
			return "", fmt.Errorf("%s: %w", c.JSON, err)
		}
		n, _ := strconv.Atoi(m[2])
		b, _ := json.Marshal(strings.Repeat(s, n))
		j = string(b)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(j)); err != nil {
		return "", fmt.Errorf("the JSON %s is not JSON: %w", c.JSON, err)
	}
	return buf.String(), nil
}

// typesPagePath finds TypesPage from the test's directory, in the module's root.
func typesPagePath(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, TypesPage)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the test's directory: cannot find %s", TypesPage)
		}
		dir = parent
	}
}

// Values is how the suite reads and writes a database's values (Fixture.Values).
type Values struct {
	// Table names the database's table on TypesPage (<!-- types: Table -->).
	Table string
	// Server, when set, names the table of the rows that differ by server (MariaDB's or MySQL
	// 8's), which are read too.
	Server func(t testing.TB, db *sql.DB) string
	// Setup, when set, runs before the tables are made: the types the page's rows name (made
	// if missing, and kept: another test's run may use them at once).
	Setup []string
	// Session, when set, is run on the connection that inserts the page's values first (MySQL: a
	// permissive sql_mode, which zero dates need).
	Session []string
	// Same is the SQL that says a and b, two columns of type typ, hold the same value (NULL and
	// NULL too).
	Same func(typ, a, b string) string
	// FromJSON, when set, is the SQL expression that turns the parameter marker param, the text
	// of a value's JSON form, back into a value of type typ, in a row of table: the value is
	// written back from its JSON. Nil: the value a Row holds is written back as a query argument.
	FromJSON func(typ, table, param string) string
	// Arg, when set, is the query argument that writes back v, a value a Row holds (else v
	// itself).
	Arg func(v any) any
	// Changes, when set, reads the table's changes through the database's change stream: it
	// prepares table (columns id and v) for it, then, after write has inserted the rows, returns
	// them as the stream delivers them.
	Changes func(t *testing.T, table string, write func()) []row.Row
}

// testValues: every value on TypesPage's table for the database arrives, through the keyset
// cursor, a backfill's chunk and the change stream, as the JSON the page gives (what every sink
// sends); Decode gives it; and the value a Row holds, written back to the database, is the same
// value.
func (h Harness) testValues(t *testing.T) {
	v := h.Fixture.Values
	if v == nil {
		t.Skip("the fixture gives no Values")
	}
	cases, err := ReadTypesPage(typesPagePath(t))
	if err != nil {
		t.Fatal(err)
	}
	tables := []string{v.Table}
	if v.Server != nil {
		tables = append(tables, v.Server(t, h.DB))
	}
	var all []ValueCase
	for _, tb := range tables {
		if len(cases[tb]) == 0 {
			t.Fatalf("%s has no table for %s (<!-- types: %s -->)", TypesPage, tb, tb)
		}
		all = append(all, cases[tb]...)
	}
	for _, s := range v.Setup {
		h.exec(t, s)
	}
	// One table per type, a row per value (in the page's order) and a NULL.
	var types []string
	byType := map[string][]ValueCase{}
	for _, c := range all {
		if _, ok := byType[c.Type]; !ok {
			types = append(types, c.Type)
		}
		byType[c.Type] = append(byType[c.Type], c)
	}
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) { h.values(t, typ, byType[typ]) })
	}
}

func (h Harness) values(t *testing.T, typ string, cases []ValueCase) {
	v := h.Fixture.Values
	name := testenv.Name("v_")
	back := name + "_b"
	h.create(t, name, "CREATE TABLE "+name+" (id BIGINT PRIMARY KEY, v "+typ+")")
	h.create(t, back, "CREATE TABLE "+back+" (id BIGINT PRIMARY KEY, v "+typ+")")
	session := func() *sql.Conn {
		conn, err := h.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range v.Session {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		return conn
	}
	write := func() {
		conn := session()
		defer conn.Close()
		for i, c := range cases {
			q := fmt.Sprintf("INSERT INTO %s (id, v) VALUES (%d, %s)", name, i+1, c.Value)
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s:%d: %s: %v", TypesPage, c.Line, q, err)
			}
		}
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id, v) VALUES (%d, NULL)", name, len(cases)+1)); err != nil {
			t.Fatal(err)
		}
	}
	var changes []row.Row
	if v.Changes != nil {
		changes = v.Changes(t, name, write)
	} else {
		write()
	}
	src := h.open(t, sourcedef.Definition{
		Table:   sourcedef.Table{Name: name},
		Columns: []string{"id", "v"},
		Cursor:  sourcedef.Cursor{Kind: state.KindInteger, Column: "id"},
		PK:      []string{"id"},
	})
	b, err := src.Fetch(ctx, nil, 1000)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	ch, err := src.ReadChunk(ctx, nil, "", b.To, 1000) // every row is at or before the position: sent
	if err != nil {
		t.Fatalf("backfill chunk: %v", err)
	}
	reads := map[string][]row.Row{"keyset": b.Rows, "backfill": ch.Rows}
	if v.Changes != nil {
		reads["changes"] = changes
	}
	for how, rows := range reads {
		if len(rows) != len(cases)+1 {
			t.Fatalf("%s: %d rows, want %d", how, len(rows), len(cases)+1)
		}
		for i, r := range rows {
			want := "null"
			at := "the NULL row"
			if i < len(cases) {
				want, _ = cases[i].want()
				at = fmt.Sprintf("%s:%d (%s)", TypesPage, cases[i].Line, cases[i].Value)
			}
			got, err := vJSON(r)
			if err != nil {
				t.Errorf("%s, %s: %v", how, at, err)
				continue
			}
			if got != want {
				t.Errorf("%s, %s:\n got %s\nwant %s", how, at, shorten(got), shorten(want))
			}
			var dst struct {
				V any `db:"v"`
			}
			if err := r.Decode(&dst); err != nil {
				t.Errorf("%s, %s: Decode: %v", how, at, err)
			}
		}
	}
	// The JSON form (or what the Row holds) is the value: written back, the database finds it
	// the same.
	conn := session()
	defer conn.Close()
	for i, r := range b.Rows {
		q := "INSERT INTO " + back + " (id, v) VALUES (" + h.ph(1) + ", " + h.ph(2) + ")"
		arg := r.Get("v")
		if v.Arg != nil {
			arg = v.Arg(arg)
		}
		if v.FromJSON != nil {
			j, _ := vJSON(r)
			q = "INSERT INTO " + back + " (id, v) VALUES (" + h.ph(1) + ", " + v.FromJSON(typ, back, h.ph(2)) + ")"
			arg = j
		}
		if _, err := conn.ExecContext(ctx, q, i+1, arg); err != nil {
			t.Errorf("writing back %s:%d (%T %s): %v", TypesPage, cases[min(i, len(cases)-1)].Line, arg, shorten(fmt.Sprint(arg)), err)
		}
	}
	rows, err := h.DB.QueryContext(ctx, "SELECT a.id FROM "+name+" a JOIN "+back+" b ON a.id = b.id WHERE NOT ("+v.Same(typ, "a.v", "b.v")+") ORDER BY a.id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if id <= len(cases) {
			t.Errorf("%s:%d (%s): written back, the value is another", TypesPage, cases[id-1].Line, cases[id-1].Value)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// vJSON is column v's JSON in the row's JSON, compacted.
func vJSON(r row.Row) (string, error) {
	j, err := r.MarshalJSON()
	if err != nil {
		return "", err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(j, &m); err != nil {
		return "", fmt.Errorf("the row's JSON %s: %w", shorten(string(j)), err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m["v"]); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func shorten(s string) string {
	if len(s) > 200 {
		return s[:100] + fmt.Sprintf("…(%d bytes)…", len(s)-200) + s[len(s)-100:]
	}
	return s
}
