// Package publicapi tests the module's public API as a whole: the packages an app imports (every
// package outside internal/ but the commands) show no type of an internal package, which the
// app could not name, and use no unsafe.
package publicapi

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is this module's path.
const module = "github.com/pseudotrigger/pseudotrigger"

// internal reports whether path is a package of this module's internal tree.
func internal(path string) bool {
	return path == module+"/internal" || strings.HasPrefix(path, module+"/internal/")
}

// goList runs go list in the module's root with args and returns its output's lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.Bytes())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// publicPackage is a package an app may import: its path, its folder and its non-test files.
type publicPackage struct {
	path, dir string
	files     []string
}

// publicPackages lists the module's packages outside internal/ but its commands (main).
func publicPackages(t *testing.T) []publicPackage {
	t.Helper()
	var out []publicPackage
	for _, line := range goList(t, "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Dir}}\t{{join .GoFiles \",\"}}", "./...") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("go list printed %q", line)
		}
		if internal(f[0]) || f[1] == "main" || f[3] == "" {
			continue
		}
		out = append(out, publicPackage{path: f[0], dir: f[2], files: strings.Split(f[3], ",")})
	}
	return out
}

// TestPublicAPIShowsNoInternalType: no exported identifier of a public package mentions a type
// of an internal package in what go doc shows of it: a function's or method's signature, a
// type's definition (its exported fields and methods, for a struct or an interface), an alias's
// target, a variable's or constant's type. An unexported field of an internal type is fine (go
// doc hides it), and so is a constant whose value is an internal package's, when its type is
// not internal (sink.DevelopmentQueueConnectionString is an untyped string). Nor does a public
// package import unsafe.
func TestPublicAPIShowsNoInternalType(t *testing.T) {
	pkgs := publicPackages(t)
	var paths []string
	for _, p := range pkgs {
		paths = append(paths, p.path)
	}
	for _, want := range []string{"poller", "sink", "handler", "pollertest", "pollers"} {
		if !slices.Contains(paths, module+"/"+want) {
			t.Fatalf("the public packages %v lack %s", paths, want)
		}
	}
	// The export data of the public packages' dependencies, for the type checker's imports.
	exports := map[string]string{}
	for _, line := range goList(t, append([]string{"-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)...) {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	for _, p := range pkgs {
		var files []*ast.File
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			for _, spec := range f.Imports {
				if spec.Path.Value == `"unsafe"` {
					t.Errorf("%s: %s imports unsafe", strings.TrimPrefix(p.path, module+"/"), name)
				}
			}
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.path, fset, files, info); err != nil {
			t.Fatalf("type-checking %s: %v", p.path, err)
		}
		for _, problem := range internalMentions(files, info) {
			t.Errorf("%s: %s", strings.TrimPrefix(p.path, module+"/"), problem)
		}
	}
}

// internalMentions lists the exported identifiers of files whose declaration, as go doc shows
// it, mentions an internal package's type: "Options.Clock mentions internal/clock.Clock".
func internalMentions(files []*ast.File, info *types.Info) []string {
	var problems []string
	mention := func(what string, obj types.Object) {
		p := fmt.Sprintf("%s mentions %s.%s", what, strings.TrimPrefix(obj.Pkg().Path(), module+"/"), obj.Name())
		if !slices.Contains(problems, p) {
			problems = append(problems, p)
		}
	}
	// expr checks a piece of syntax: each name in it that stands for an internal package's
	// object (the Row of row.Row).
	expr := func(what string, e ast.Node) {
		ast.Inspect(e, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if obj := info.Uses[id]; obj != nil && obj.Pkg() != nil && internal(obj.Pkg().Path()) {
					if _, isPkg := obj.(*types.PkgName); !isPkg {
						mention(what, obj)
					}
				}
			}
			return true
		})
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				what := d.Name.Name
				if d.Recv != nil {
					recv := receiverName(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					what = recv + "." + what
				}
				if d.Name.IsExported() {
					expr(what, d.Type)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if s.TypeParams != nil {
							expr(s.Name.Name, s.TypeParams)
						}
						typeDef(s.Name.Name, s.Type, expr)
					case *ast.ValueSpec:
						for _, name := range s.Names {
							if !name.IsExported() {
								continue
							}
							if s.Type != nil {
								expr(name.Name, s.Type)
							}
							if obj := info.Defs[name]; obj != nil {
								internalTypes(obj.Type(), func(o types.Object) { mention(name.Name, o) })
							}
						}
					}
				}
			}
		}
	}
	return problems
}

// typeDef checks a type's definition as go doc shows it: a struct's exported fields, an
// interface's exported methods and embedded types, anything else whole.
func typeDef(name string, t ast.Expr, expr func(string, ast.Node)) {
	switch t := t.(type) {
	case *ast.StructType:
		for _, field := range t.Fields.List {
			if len(field.Names) == 0 { // embedded: exported when its type's name is
				if n := receiverName(field.Type); ast.IsExported(n) {
					expr(name+"."+n, field.Type)
				}
				continue
			}
			for _, n := range field.Names {
				if n.IsExported() {
					expr(name+"."+n.Name, field.Type)
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				expr(name, m.Type)
				continue
			}
			for _, n := range m.Names {
				if n.IsExported() {
					expr(name+"."+n.Name, m.Type)
				}
			}
		}
	default:
		expr(name, t)
	}
}

// receiverName is the name of a receiver's or an embedded field's type: T of T, *T, T[P], pkg.T.
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// internalTypes calls found with each named type of an internal package that t is made of: a
// variable's type, which its declaration may not spell.
func internalTypes(t types.Type, found func(types.Object)) {
	seen := map[types.Type]bool{}
	var walk func(types.Type)
	walk = func(t types.Type) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Alias:
			if obj := t.Obj(); obj.Pkg() != nil && internal(obj.Pkg().Path()) {
				found(obj)
			}
			walk(types.Unalias(t))
		case *types.Named:
			if obj := t.Obj(); obj.Pkg() != nil && internal(obj.Pkg().Path()) {
				found(obj)
			}
			for a := range t.TypeArgs().Types() {
				walk(a)
			}
		case *types.Pointer:
			walk(t.Elem())
		case *types.Slice:
			walk(t.Elem())
		case *types.Array:
			walk(t.Elem())
		case *types.Chan:
			walk(t.Elem())
		case *types.Map:
			walk(t.Key())
			walk(t.Elem())
		case *types.Signature:
			for v := range t.Params().Variables() {
				walk(v.Type())
			}
			for v := range t.Results().Variables() {
				walk(v.Type())
			}
		case *types.Struct:
			for f := range t.Fields() {
				if f.Exported() {
					walk(f.Type())
				}
			}
		case *types.Interface:
			for m := range t.Methods() {
				if m.Exported() {
					walk(m.Type())
				}
			}
		}
	}
	walk(t)
}
