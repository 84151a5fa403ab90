package poller_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/state"
	"github.com/pseudotrigger/pseudotrigger/poller"
)

// authorAPI is every name package poller exports, as `go doc -all` lists them: what a poller
// author writes with. The runtime's plumbing lives in internal/pollerdef. A name added to the
// package must be added here, on purpose.
var authorAPI = []string{
	"Batch", "Batch.Attempt", "Batch.FencingToken", "Batch.From", "Batch.ID", "Batch.Outbox", "Batch.Poller", "Batch.Raw", "Batch.Rows", "Batch.Tables", "Batch.To",
	"ChangeTracking", "Integer", "Logical", "RowVersion", "TimestampPK", "XID",
	"Cursor", "Cursor.Kind", "Cursor.Tiebreaker", "Cursor.Time", "Cursor.Value",
	"CursorKind",
	"Cleanup", "Cleanup.Column", "Cleanup.Delete", "Cleanup.OlderThan", "WithCleanup",
	"Outbox", "Outbox.AggregateID", "Outbox.AggregateType", "Outbox.ContentType", "Outbox.Headers", "Outbox.ID", "Outbox.Messages", "Outbox.Payload", "Outbox.Type", "WithOutbox",
	"New",
	"Option", "WithBatchSize", "WithColumns", "WithCursorColumn", "WithFilter", "WithInitialSnapshot", "WithKey", "WithSchema", "WithSettleLag", "WithSetup", "WithSkipWriter", "WithTables", "WithTarget",
	"Poller", "Poller.Name",
	"Row", "Row.Before", "Row.Changed", "Row.Columns", "Row.Cursor", "Row.Decode", "Row.Get", "Row.HasRow", "Row.Key", "Row.MarshalJSON", "Row.Op", "Row.Table", "Row.Transaction", "Row.Unchanged", "Row.Values",
	"Table", "Table.Columns", "Table.Filter", "Table.Key", "Table.Name", "Table.Schema",
	"Transaction", "Transaction.ChangeVersion", "Transaction.CommitLSN", "Transaction.CommitTime", "Transaction.ID", "Transaction.Index", "Transaction.Last",
}

// parsePoller parses the package's non-test files.
func parsePoller(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("no source files")
	}
	return fset, files
}

// TestExportsOnlyTheAuthorAPI: the package exports exactly authorAPI (its doc, as go doc shows
// it), and no exported signature or field names a type of an internal package (which an author
// could not name): what an author sees is theirs to use.
func TestExportsOnlyTheAuthorAPI(t *testing.T) {
	fset, files := parsePoller(t)
	p, err := doc.NewFromFiles(fset, files, "github.com/pseudotrigger/pseudotrigger/poller")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			got = append(got, v.Names...)
		}
	}
	funcs := func(prefix string, fs []*doc.Func) {
		for _, f := range fs {
			got = append(got, prefix+f.Name)
			internalTypes(t, files, f.Decl.Type, f.Name)
		}
	}
	values(p.Consts)
	values(p.Vars)
	funcs("", p.Funcs)
	for _, typ := range p.Types {
		got = append(got, typ.Name)
		values(typ.Consts)
		values(typ.Vars)
		funcs("", typ.Funcs)
		funcs(typ.Name+".", typ.Methods)
		for _, spec := range typ.Decl.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, field := range st.Fields.List {
				for _, name := range field.Names {
					if name.IsExported() {
						got = append(got, typ.Name+"."+name.Name)
						internalTypes(t, files, field.Type, typ.Name+"."+name.Name)
					}
				}
			}
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(authorAPI))
	for _, name := range got {
		if !slices.Contains(want, name) {
			t.Errorf("package poller exports %s, which is not in authorAPI: plumbing belongs in internal/pollerdef; a name for authors goes in the list", name)
		}
	}
	for _, name := range want {
		if !slices.Contains(got, name) {
			t.Errorf("authorAPI lists %s, which package poller does not export: take it off the list", name)
		}
	}
}

// internalTypes fails the test when expr (a signature or a field's type) names a type of an
// internal package.
func internalTypes(t *testing.T, files []*ast.File, expr ast.Node, what string) {
	t.Helper()
	internal := map[string]bool{}
	for _, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(path, "/internal/") {
				continue
			}
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			internal[name] = true
		}
	}
	ast.Inspect(expr, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && internal[pkg.Name] {
				t.Errorf("%s names %s.%s, a type of an internal package", what, pkg.Name, sel.Sel.Name)
			}
		}
		return true
	})
}

// TestNoExportedAlias: every exported type of the package is defined here (type T ...), none is
// an alias (type T = ...), so that the types an author sees and their methods are the
// package's own.
func TestNoExportedAlias(t *testing.T) {
	_, files := parsePoller(t)
	types := 0
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				if !ts.Name.IsExported() {
					continue
				}
				types++
				if ts.Assign.IsValid() {
					t.Errorf("type %s is an alias: define it in package poller instead", ts.Name.Name)
				}
			}
		}
	}
	if types == 0 {
		t.Fatal("no exported type found")
	}
}

// TestCursorKindsAreTheStatesKinds: the cursor kinds an author writes are spelled as the state
// document and the runtime spell them, each of them and no other.
func TestCursorKindsAreTheStatesKinds(t *testing.T) {
	got := []string{string(poller.TimestampPK), string(poller.Integer), string(poller.RowVersion),
		string(poller.XID), string(poller.Logical), string(poller.ChangeTracking)}
	if !slices.Equal(got, state.Kinds) {
		t.Errorf("poller's cursor kinds are %q, the state document's %q", got, state.Kinds)
	}
}
