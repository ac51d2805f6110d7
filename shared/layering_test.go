package shared_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/runtwice/twice/"

// testImportExceptions are the packages below shared/ that its tests may import, each with its
// reason. Nothing else: a local stand-in is reached through a contract suite its own package
// runs, and a shared test that needs one (the local runner, the simulator, the local queue)
// lives with the stand-in in infra/.
var testImportExceptions = map[string]string{
	"infra/testenv": "connects tests to the real servers the test script starts (DynamoDB Local, moto, " +
		"chromium); it stands in for nothing, so a shared test on it runs against the real protocol, " +
		"and infra/ tests use it too",
}

// TestSharedImportsNothingFromInfra keeps the layering functions -> shared <- infra: a local
// stand-in implements a shared contract from below, never the other way round. No file under
// shared/, test or not and whatever its build tags, imports anything under infra/ or
// functions/; a test file may import a package of testImportExceptions, whose own dependencies
// reach nothing else under infra/.
func TestSharedImportsNothingFromInfra(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	fset := token.NewFileSet()
	used := map[string]bool{}
	files, tests := 0, 0
	err = filepath.WalkDir(filepath.Join(root, "shared"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		test := strings.HasSuffix(path, "_test.go")
		files++
		if test {
			tests++
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			below, ok := strings.CutPrefix(imp, module)
			if !ok || !strings.HasPrefix(below, "infra/") && !strings.HasPrefix(below, "functions/") {
				continue
			}
			if _, excepted := testImportExceptions[below]; test && excepted {
				used[below] = true
				continue
			}
			t.Errorf("%s imports %s", rel, below)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 200 || tests < 100 {
		t.Fatalf("only %d files (%d tests) parsed under shared/", files, tests)
	}
	for pkg := range testImportExceptions {
		if !used[pkg] {
			t.Errorf("exception %s is imported by no shared test: remove it", pkg)
			continue
		}
		cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "./"+pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, module+pkg) {
			t.Fatalf("go list -deps ./%s did not list it: not the dependency graph", pkg)
		}
		for _, dep := range deps {
			if below, ok := strings.CutPrefix(dep, module); ok && below != pkg &&
				(strings.HasPrefix(below, "infra/") || strings.HasPrefix(below, "functions/")) {
				t.Errorf("exception %s links %s: a shared test would reach it through the exception", pkg, below)
			}
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d files under shared/ (%d tests) import nothing from infra/ or functions/; named exceptions for tests: %d",
		files, tests, len(testImportExceptions))
}
