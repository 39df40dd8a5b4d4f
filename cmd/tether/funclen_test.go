package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a product function may span, from its
// signature to its closing brace.
const maxFuncLines = 80

// Product functions stay short enough to read at once: none of the code
// tether ships (cmd/ and internal/, not the test worlds in
// internal/testing, not tether-bench) spans more than maxFuncLines lines.
// A table, a function that ends by returning one composite literal, is
// exempt: its rows are read one at a time.
func TestNoLongProductFunction(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{"../../cmd", "../../internal"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			slash := filepath.ToSlash(path)
			if d.IsDir() && (strings.HasSuffix(slash, "internal/testing") || strings.HasSuffix(slash, "cmd/tether-bench")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil || isTable(fn) {
					continue
				}
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s spans %d lines (at most %d): split it", fset.Position(fn.Pos()), fn.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// isTable reports whether fn ends by returning one composite literal.
func isTable(fn *ast.FuncDecl) bool {
	list := fn.Body.List
	if len(list) == 0 {
		return false
	}
	ret, ok := list[len(list)-1].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return false
	}
	_, ok = ret.Results[0].(*ast.CompositeLit)
	return ok
}
