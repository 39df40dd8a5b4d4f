package eventreason

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var tetherReason = regexp.MustCompile(`^Tether[A-Z][A-Za-z]+$`)

// Every reason is in one row, documented where operators read about
// Events (docs/), and no product code outside this package spells a
// reason itself: it names the catalogue's constant.
func TestReasonsCatalogue(t *testing.T) {
	rows := map[string]bool{}
	for _, r := range Reasons() {
		if rows[r.Name] || !tetherReason.MatchString(r.Name) || r.What == "" {
			t.Errorf("row %+v: repeated, not a Tether reason, or says nothing", r)
		}
		rows[r.Name] = true
	}
	var docs strings.Builder
	for _, glob := range []string{"../../docs/*.md", "../../docs/checks/*.md"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs.Write(b)
		}
	}
	for name := range rows {
		if !strings.Contains(docs.String(), "`"+name+"`") {
			t.Errorf("reason %s is in no page of docs/: say when it is recorded", name)
		}
	}
	fset := token.NewFileSet()
	for _, root := range []string{"../../cmd", "../../internal"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.Contains(filepath.ToSlash(path), "internal/testing/") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			self := filepath.Base(filepath.Dir(path)) == "eventreason"
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil || !tetherReason.MatchString(s) {
					return true
				}
				switch {
				case !self:
					t.Errorf("%s: %q: name the reason from package eventreason", fset.Position(lit.Pos()), s)
				case !rows[s]:
					t.Errorf("%s: %q has no row in Reasons", fset.Position(lit.Pos()), s)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
