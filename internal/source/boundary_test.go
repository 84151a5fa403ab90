package source_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
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
var sourcePackages = map[string]bool{"source": true, "driver": true, "row": true, "sourcedef": true, "setup": true}

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
