package rie_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runtwice/twice/infra/rie"
)

const module = "github.com/runtwice/twice/"

// deps lists the packages pattern links (go list -deps, build tags as deployed), by the
// package that imports them.
func deps(t *testing.T, root string, pattern ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-tags", "lambda.norpc", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, pattern...)
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	by := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		by[f[0]] = f[1:]
	}
	return by
}

// TestLambdaBinariesLinkNothingFromInfra: infra/ is what stands in for AWS locally (the
// state-machine interpreter, bbolt, the simulator). None of it belongs in a Lambda binary,
// where it would only add size and INIT time.
func TestLambdaBinariesLinkNothingFromInfra(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range functions(t, root) {
		t.Run(fn, func(t *testing.T) {
			g := deps(t, root, "./functions/"+fn)
			if len(g) < 10 {
				t.Fatalf("go list found %d packages: not the dependency graph", len(g))
			}
			for pkg, imports := range g {
				for _, imp := range imports {
					if strings.HasPrefix(imp, module+"infra/") {
						t.Errorf("%s links %s (imported by %s)", fn, imp, pkg)
					}
				}
			}
		})
	}
}

// TestSharedImportsNothingFromInfra keeps the layering functions -> shared <- infra: a local
// stand-in implements a shared contract from below, never the other way round. Tests of
// shared/ may use the stand-ins (they run the contract suites on them); the packages may not.
func TestSharedImportsNothingFromInfra(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	g := deps(t, root, "./shared/...")
	n := 0
	for pkg, imports := range g {
		if !strings.HasPrefix(pkg, module+"shared/") {
			continue
		}
		n++
		for _, imp := range imports {
			if strings.HasPrefix(imp, module+"infra/") || strings.HasPrefix(imp, module+"functions/") {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d shared packages listed", n)
	}
	t.Logf("%d shared packages import nothing from infra/ or functions/", n)
}

// constructionExceptions are the named exceptions to the construction idiom (README,
// Contributing, "Construction"), each with its reason. Everything else in shared/ is a struct
// built with a composite literal (or NewX(X) where building does work once).
var constructionExceptions = map[string]string{
	// Per-call options of idempotency.Do[T]: they vary by call, not by component.
	"idempotency.CallOption": "per-call options of Do",
	// Arguments of functions that build handlers (Wrap, SQS, Middleware), not components; the
	// README's Powertools table maps Powertools' options onto their fields.
	"idemlambda.Config":            "the settings of Wrap and SQS",
	"idempotency.MiddlewareConfig": "the settings of Keeper.Middleware",
}

// TestOneConstructionIdiom keeps the construction idiom of shared/: no functional options
// (an exported With* function, or a variadic parameter, of a func type declared to configure
// something), no Config type beside a component, a logger field is Log *slog.Logger, a clock
// field is Now func() time.Time, and a clock.Clock (for timers) is the field Clock.
func TestOneConstructionIdiom(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{} // directory -> files
	err = filepath.WalkDir(filepath.Join(root, "shared"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("only %d shared packages parsed", len(pkgs))
	}
	excepted := map[string]bool{}
	fields := 0
	for _, files := range pkgs {
		pkg := files[0].Name.Name
		funcTypes := map[string]bool{} // type X func(...) declared here
		for _, f := range files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					continue
				}
				for _, spec := range gd.Specs {
					ts := spec.(*ast.TypeSpec)
					name := pkg + "." + ts.Name.Name
					if _, ok := ts.Type.(*ast.FuncType); ok {
						funcTypes[ts.Name.Name] = true
					}
					if ts.Name.IsExported() && strings.HasSuffix(ts.Name.Name, "Config") {
						if constructionExceptions[name] != "" {
							excepted[name] = true
						} else {
							t.Errorf("%s: a Config type; settings are fields of the component (%s)", name, fset.Position(ts.Pos()))
						}
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fl := range st.Fields.List {
						typ := types.ExprString(fl.Type)
						for _, n := range fl.Names {
							fields++
							at := fmt.Sprintf("%s.%s (%s)", name, n.Name, fset.Position(n.Pos()))
							switch {
							case n.Name == "Logger" || typ == "*slog.Logger" && n.IsExported() && n.Name != "Log":
								t.Errorf("%s: the logger field is Log *slog.Logger", at)
							case n.Name == "Log" && typ != "*slog.Logger":
								t.Errorf("%s: Log is a *slog.Logger, not %s", at, typ)
							case typ == "clock.Clock" && n.Name != "Clock", n.Name == "Clock" && typ != "clock.Clock":
								t.Errorf("%s: a clock.Clock (for timers) is the field Clock, and Clock is one", at)
							case n.IsExported() && typ == "func() time.Time" && n.Name != "Now":
								t.Errorf("%s: the clock field is Now func() time.Time", at)
							}
						}
					}
				}
			}
		}
		isOption := func(e ast.Expr) (string, bool) {
			if el, ok := e.(*ast.Ellipsis); ok {
				e = el.Elt
			}
			id, ok := e.(*ast.Ident)
			if !ok {
				return "", false
			}
			return pkg + "." + id.Name, funcTypes[id.Name]
		}
		for _, f := range files {
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Recv != nil || !fd.Name.IsExported() {
					continue
				}
				at := fmt.Sprintf("%s.%s (%s)", pkg, fd.Name.Name, fset.Position(fd.Pos()))
				if strings.HasPrefix(fd.Name.Name, "With") && fd.Type.Results != nil && len(fd.Type.Results.List) == 1 {
					if opt, ok := isOption(fd.Type.Results.List[0].Type); ok {
						if constructionExceptions[opt] != "" {
							excepted[opt] = true
						} else {
							t.Errorf("%s returns the option type %s: set a field instead", at, opt)
						}
					}
				}
				if ps := fd.Type.Params.List; len(ps) > 0 {
					if _, variadic := ps[len(ps)-1].Type.(*ast.Ellipsis); variadic {
						if opt, ok := isOption(ps[len(ps)-1].Type); ok && constructionExceptions[opt] == "" {
							t.Errorf("%s takes ...%s: take the struct instead", at, opt)
						}
					}
				}
			}
		}
	}
	for name := range constructionExceptions {
		if !excepted[name] {
			t.Errorf("exception %s no longer exists: remove it here and in the README", name)
		}
	}
	t.Logf("%d packages, %d struct fields checked; %d named exceptions", len(pkgs), fields, len(excepted))
}
