package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// worlds are the packages that start a test world.
var worlds = []string{
	"github.com/tether-dev/tether/internal/testing/testenv",
	"github.com/tether-dev/tether/internal/testing/localenv",
	"github.com/tether-dev/tether/internal/testing/controlplane",
	"github.com/tether-dev/tether/internal/testing/realnode",
	"github.com/tether-dev/tether/internal/testing/openstack",
}

// A file named *_unit_test.go holds pure tests: it imports no package that
// starts a test world, so `go test -run` of its tests needs no control
// plane (the package's environment starts only when a test asks for it).
func TestUnitTestFilesNeedNoWorld(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{"../../cmd", "../../internal", "../../test"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_unit_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, w := range worlds {
					if p == w {
						t.Errorf("%s imports %s: a unit test file needs no test world; move the test to a file without _unit", path, p)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
