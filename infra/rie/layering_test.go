package rie_test

import (
	"os/exec"
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

// TestDeadLetterTableLinksNoProducer: what opens dead-letter records and carries out their
// retries lives with each record's producer (recovery, recon, the webhook worker), which import
// shared/deadletter, never the other way round; deadletter declares the one-method interfaces
// it calls (Opener, Requeuer, Loop). So the table and the function that only fills it
// (deadletter-sink) link none of the producers' packages and clients.
func TestDeadLetterTableLinksNoProducer(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	producers := []string{"shared/recovery", "shared/recon", "shared/webhooks/worker", "shared/deadletter/adapt"}
	for _, pattern := range []string{"./shared/deadletter", "./functions/deadletter-sink"} {
		g := deps(t, root, pattern)
		if _, ok := g[module+"shared/deadletter"]; !ok {
			t.Fatalf("%s does not link shared/deadletter: not the graph", pattern)
		}
		for _, p := range producers {
			if _, ok := g[module+p]; ok {
				t.Errorf("%s links %s", pattern, p)
			}
		}
	}
}
