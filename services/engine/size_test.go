package engine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineSize holds issue 20's limits on the engine's own code (its test files are not
// counted): no type with more than 25 methods and no file over 500 lines. A type that grows
// past them gets a facade of its own (Engine.Groups, Engine.Held, Engine.Approvals).
func TestEngineSize(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	methods := map[string]int{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > 500 {
			t.Errorf("%s has %d lines: at most 500", name, n)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				methods[id.Name]++
			}
		}
	}
	if len(methods) == 0 {
		t.Fatal("no methods found: the test reads the wrong folder")
	}
	for typ, n := range methods {
		if n > 25 {
			t.Errorf("type %s has %d methods: at most 25", typ, n)
		}
	}
}
