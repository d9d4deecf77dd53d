package handlers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHandlersOwnInterfaces keeps the handlers on their own interfaces (STYLE.md, "A
// handler, a page, a service"): no struct but Server holds a *Server (a back-reference
// around the narrow interfaces), no handler file imports GORM, and the database is named
// only where the app is wired (server.go): the handlers get services, which take the
// database themselves, and never query it or hand it on.
func TestHandlersOwnInterfaces(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "gorm.io/gorm" || strings.HasPrefix(p, "gorm.io/") {
				t.Errorf("%s imports %s: handlers talk to services, not to the database", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				st, ok := n.Type.(*ast.StructType)
				if !ok || n.Name.Name == "Server" {
					return true
				}
				for _, fld := range st.Fields.List {
					if isServer(fld.Type) {
						t.Errorf("%s: %s holds a Server: give it the narrow interfaces it uses instead", fset.Position(fld.Pos()), n.Name.Name)
					}
				}
			case *ast.SelectorExpr:
				if name == "server.go" {
					return true
				}
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "models" && n.Sel.Name == "DB" {
					t.Errorf("%s: names models.DB: only server.go wires the database into services", fset.Position(n.Pos()))
				} else if n.Sel.Name == "DB" {
					t.Errorf("%s: uses a DB (%s.DB): handlers get services, which take the database themselves", fset.Position(n.Pos()), exprString(n.X))
				}
			}
			return true
		})
	}
}

// isServer reports whether a field's type is Server or *Server.
func isServer(e ast.Expr) bool {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "Server"
}

func exprString(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "…"
}
