package source_test

import (
	"context"
	"database/sql"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/source"
	"github.com/pseudotrigger/pseudotrigger/internal/source/row"
	"github.com/pseudotrigger/pseudotrigger/internal/source/setup"
	"github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// TestNoAssertionOnSources: outside internal/source nothing asks a driver, a source or a change
// stream what it is (a type assertion or type switch to a type of package source): every
// capability is a method of the Driver interface, so that a fifth database touches its own
// package, its registration and the conformance suite only.
func TestNoAssertionOnSources(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == filepath.Join("internal", "source") || rel != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var typ ast.Expr
			switch x := n.(type) {
			case *ast.TypeAssertExpr:
				typ = x.Type
			case *ast.TypeSwitchStmt:
				for _, c := range x.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						if sel, ok := selector(e); ok && isSource(sel) {
							found = append(found, rel+": case "+sel.X.(*ast.Ident).Name+"."+sel.Sel.Name)
						}
					}
				}
			}
			if sel, ok := selector(typ); ok && isSource(sel) {
				found = append(found, rel+": .("+sel.X.(*ast.Ident).Name+"."+sel.Sel.Name+")")
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no Go file read")
	}
	if len(found) > 0 {
		t.Fatalf("type assertions on package source's types outside it (make the capability a Driver method):\n%s", strings.Join(found, "\n"))
	}
}

// sourcePackages are package source's own and those cut out of it, by the names their importers
// give them.
var sourcePackages = map[string]bool{"source": true, "row": true, "sourcedef": true, "setup": true}

func isSource(sel *ast.SelectorExpr) bool {
	id, ok := sel.X.(*ast.Ident)
	return ok && sourcePackages[id.Name]
}

// selector is e, a type, as pkg.Name, looking through pointers.
func selector(e ast.Expr) (*ast.SelectorExpr, bool) {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	return sel, ok
}

// minimal is a fifth database as little as it can be: the methods every database answers, and
// Defaults for the rest.
type minimal struct{ source.Defaults }

func (minimal) Name() string                             { return "minimal" }
func (minimal) Open(string) (*sql.DB, error)             { return nil, errors.ErrUnsupported }
func (minimal) Location(string) (source.Location, error) { return source.Location{}, nil }
func (minimal) Caseless() bool                           { return false }
func (minimal) Placeholder(int) string                   { return "?" }
func (minimal) Classify(string) (row.Class, row.TSFlavor) {
	return row.ClassOther, row.TSNone
}
func (minimal) KeyCodec(row.ColumnType) (row.KeyCodec, bool) {
	return row.KeyCodec{}, false
}
func (minimal) Script([]string) string { return "" }
func (minimal) DDLInTransaction() bool { return false }
func (minimal) UpperBound(string, row.TSFlavor, string, time.Duration, func() string) source.Bound {
	return source.Bound{}
}
func (minimal) StampCheck(row.TSFlavor, string, string, string) (string, any, string) {
	return "", nil, ""
}
func (minimal) CheckSetup(context.Context, *sql.DB, sourcedef.Definition) ([]setup.Finding, error) {
	return nil, nil
}

// TestDefaultsAnswerNotSupported: a driver that says nothing of a capability answers
// ErrNotSupported where the caller must tell "cannot" from an answer, and the neutral answer
// elsewhere.
func TestDefaultsAnswerNotSupported(t *testing.T) {
	var d source.Driver = minimal{}
	ctx := context.Background()
	if _, err := d.ChangeStream(state.KindLogical, nil); !errors.Is(err, source.ErrNotSupported) {
		t.Errorf("ChangeStream: %v", err)
	}
	if _, err := d.OpenCDC(ctx, nil, source.Config{}); !errors.Is(err, source.ErrNotSupported) {
		t.Errorf("OpenCDC: %v", err)
	}
	if _, err := d.UniqueKey(ctx, nil, sourcedef.Table{Name: "t"}, []string{"id"}); !errors.Is(err, source.ErrNotSupported) {
		t.Errorf("UniqueKey: %v", err)
	}
	if why, err := d.Refuse(row.ColumnType{DBType: "X"}); why != "" || !errors.Is(err, source.ErrNotSupported) {
		t.Errorf("Refuse: %q, %v", why, err)
	}
	if k, _ := d.CDCKind(); k != "" {
		t.Errorf("CDCKind: %q", k)
	}
	if got := d.IsNull(`"c"`); got != `"c" IS NULL` {
		t.Errorf("IsNull: %q", got)
	}
	if got, err := d.UUID([]byte("0b6f6c4e-0000-4000-8000-000000000000")); err != nil || got != "0b6f6c4e-0000-4000-8000-000000000000" {
		t.Errorf("UUID: %q, %v", got, err)
	}
	if d.Supports(state.KindLogical) || !d.Supports(state.KindTimestampPK) || !d.Supports(state.KindInteger) {
		t.Error("Supports: every database reads timestamp+pk and integer, and nothing else by default")
	}
	if _, ok := (source.Drivers{d}).CDCAdmin(""); ok {
		t.Error("a driver without a set-up to administer was found as the administrator of kind \"\"")
	}
}
