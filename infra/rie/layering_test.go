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
	"slices"
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
// state-machine interpreter, the local queue, the simulator). None of it belongs in a Lambda
// binary, where it would only add size and INIT time. (That shared/ imports nothing from
// infra/, tests included, is shared/layering_test.go's.)
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

// serviceOf maps an IAM action's service prefix to the aws-sdk-go-v2 client package that calls
// it (ssm's GetParameter is made by shared/ssmparam, which signs one request itself).
var serviceOf = map[string]string{"dynamodb": "dynamodb", "sqs": "sqs", "states": "sfn", "events": "eventbridge",
	"ssm": "ssm", "cloudwatch": "cloudwatch", "lambda": "lambda", "sns": "sns", "kms": "kms", "logs": "cloudwatchlogs"}

// TestLambdaBinariesLinkOnlyTheClientsTheyMayCall: a function links an AWS service's client
// exactly when its policy grants that service some action. A client the function never calls
// is not free: each service package builds its serialization schemas and endpoint tables in
// package init, before the first request (dynamodb's alone is about 1 ms of INIT), so
// payments-api no longer links the SQS, Step Functions and EventBridge clients the outbox relay
// uses. Actions granted for an event source mapping (a stream or queue the function is
// invoked from, read by Lambda with the function's role) need no client.
func TestLambdaBinariesLinkOnlyTheClientsTheyMayCall(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	grants, err := rie.TemplateGrants(root + "/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	byMapping := map[string]bool{"dynamodb:DescribeStream": true, "dynamodb:GetRecords": true, "dynamodb:GetShardIterator": true,
		"dynamodb:ListStreams": true, "sqs:ReceiveMessage": true, "sqs:DeleteMessage": true, "sqs:GetQueueAttributes": true}
	for _, fn := range functions(t, root) {
		t.Run(fn, func(t *testing.T) {
			g, ok := grants[fn]
			if !ok {
				t.Fatalf("%s is not in template.yaml", fn)
			}
			want := map[string]bool{}
			for c := range g.Actions {
				if byMapping[c.Action] {
					continue
				}
				prefix, _, _ := strings.Cut(c.Action, ":")
				svc, ok := serviceOf[prefix]
				if !ok {
					t.Fatalf("%s: action %s of a service this test does not know", fn, c.Action)
				}
				want[svc] = true
			}
			linked := map[string]bool{}
			for pkg := range deps(t, root, "./functions/"+fn) {
				if svc, ok := strings.CutPrefix(pkg, "github.com/aws/aws-sdk-go-v2/service/"); ok && !strings.Contains(svc, "/") {
					linked[svc] = true
				}
				if pkg == module+"shared/ssmparam" {
					linked["ssm"] = true
				}
			}
			for svc := range linked {
				if !want[svc] {
					t.Errorf("%s links the %s client but its policy grants no %s action it would call", fn, svc, svc)
				}
			}
			for svc := range want {
				if !linked[svc] {
					t.Errorf("%s is granted %s actions but links no %s client", fn, svc, svc)
				}
			}
		})
	}
}

// heavyModules are the third-party modules whose packages a Lambda binary should link only when
// its job needs them: each adds size and package init to INIT.
var heavyModules = []string{
	"github.com/stripe/stripe-go/v82",
	"github.com/standard-webhooks/standard-webhooks",
	"github.com/theory/jsonpath",
	"golang.org/x/text",
	"github.com/coreos/go-oidc/v3",
	"golang.org/x/oauth2",
	"github.com/a-h/templ",
	"github.com/go-json-experiment/json",
	"go.etcd.io/bbolt",
	// The OpenAPI validator of docs/openapi_test.go: a test-only dependency, linked by no function.
	"github.com/pb33f/libopenapi",
	"github.com/pb33f/libopenapi-validator",
}

// Why a function may link a heavy module.
const (
	callsStripe  = "calls the provider (shared/stripeprovider)"
	verifies     = "verifies webhook signatures (shared/webhooks/signature)"
	currency     = "shared/payments validates currency codes (x/text/currency): linked wherever the payment service is"
	attemptLog   = "the attempt log redacts JSON bodies (shared/redact, through shared/attempts)"
	consoleLogin = "the console's OIDC login (shared/opsapi)"
)

// mayLink pins, per function, the heavy modules it links and why.
var mayLink = map[string]map[string]string{
	"deadletter-sink": {},
	"webhook-ingest": {
		"github.com/stripe/stripe-go/v82":                verifies + ": Stripe-Signature through stripe-go's webhook package",
		"github.com/standard-webhooks/standard-webhooks": verifies + ": the Standard Webhooks reference library",
		"github.com/go-json-experiment/json":             attemptLog,
	},
	"webhook-worker": {"golang.org/x/text": currency},
	"payments-api": {
		"github.com/stripe/stripe-go/v82":    callsStripe,
		"golang.org/x/text":                  currency,
		"github.com/go-json-experiment/json": attemptLog,
	},
	"payment-resolver": {
		"github.com/stripe/stripe-go/v82":    callsStripe,
		"github.com/theory/jsonpath":         "keys each resolve message by a JSONPath over its record (shared/payments/resolvequeue, idemlambda)",
		"golang.org/x/text":                  currency,
		"github.com/go-json-experiment/json": attemptLog,
	},
	"recovery-steps": {
		"github.com/stripe/stripe-go/v82":    callsStripe,
		"golang.org/x/text":                  currency,
		"github.com/go-json-experiment/json": attemptLog,
	},
	"reconciler": {
		"github.com/stripe/stripe-go/v82":    callsStripe + ": lists payments and events",
		"golang.org/x/text":                  currency,
		"github.com/go-json-experiment/json": attemptLog,
	},
	"outbox-relay": {"golang.org/x/text": currency},
	"operator-api": {
		"github.com/coreos/go-oidc/v3":       consoleLogin,
		"golang.org/x/oauth2":                consoleLogin,
		"github.com/a-h/templ":               "renders the console's pages",
		"golang.org/x/text":                  currency,
		"github.com/go-json-experiment/json": attemptLog,
	},
}

// TestLambdaBinariesLinkOnlyTheModulesTheirJobNeeds: a function links a heavy third-party
// module (stripe-go, JSONPath, x/text, OIDC, templ, ...) exactly when mayLink says it does, and
// why. An import edge that drags one into a function that does not need it (the dead-letter sink
// once linked stripe-go, JSONPath and x/text through a type it read from shared/payments) fails
// here, naming the package that imports it; a module a function no longer links must leave the
// table.
func TestLambdaBinariesLinkOnlyTheModulesTheirJobNeeds(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	moduleOf := func(pkg string) string {
		for _, m := range heavyModules {
			if pkg == m || strings.HasPrefix(pkg, m+"/") {
				return m
			}
		}
		return ""
	}
	fns := functions(t, root)
	if len(fns) != len(mayLink) {
		t.Errorf("%d functions, %d in mayLink: every function needs a row", len(fns), len(mayLink))
	}
	for _, fn := range fns {
		t.Run(fn, func(t *testing.T) {
			allowed, ok := mayLink[fn]
			if !ok {
				t.Fatalf("%s has no row in mayLink", fn)
			}
			g := deps(t, root, "./functions/"+fn)
			linked := map[string][]string{} // module -> the packages outside it that import it
			for pkg, imports := range g {
				for _, imp := range imports {
					if m := moduleOf(imp); m != "" && moduleOf(pkg) != m {
						linked[m] = append(linked[m], pkg+" imports "+imp)
					}
				}
			}
			for m, edges := range linked {
				if allowed[m] == "" {
					slices.Sort(edges)
					t.Errorf("%s links %s, which its job does not need: %s", fn, m, strings.Join(edges, "; "))
				}
			}
			for m := range allowed {
				if !slices.Contains(heavyModules, m) {
					t.Errorf("mayLink[%s] names %s, not in heavyModules", fn, m)
				}
				if linked[m] == nil {
					t.Errorf("%s no longer links %s: remove it from mayLink", fn, m)
				}
			}
		})
	}
}

// TestLambdaBinariesLinkNoEagerSchemas: from dynamodb v1.69.0, sqs v1.49.0 and eventbridge
// v1.49.0, aws-sdk-go-v2's service packages serialize through schemas their `schemas` package
// builds in package initialisation (dynamodb's: 3,151 objects, about 1 ms of every cold start;
// a DynamoDB-only function went from 1.13x to 1.40x a bare function's INIT). go.mod pins the
// last versions before that (docs/performance.md). An upgrade that brings a schemas package
// back fails here: measure it with make bench-lambda first, and move the pin only if the SDK
// builds its schemas lazily by then or the figures say the cost is worth it.
func TestLambdaBinariesLinkNoEagerSchemas(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	var pattern []string
	for _, fn := range functions(t, root) {
		pattern = append(pattern, "./functions/"+fn)
	}
	for pkg := range deps(t, root, pattern...) {
		if svc, ok := strings.CutPrefix(pkg, "github.com/aws/aws-sdk-go-v2/service/"); ok && strings.HasSuffix(svc, "/schemas") {
			t.Errorf("a Lambda binary links %s, whose package initialisation builds every schema of the service", pkg)
		}
	}
}

// TestDomainPackagesTakePlainMessages: aws-lambda-go's event types stay on the Lambda side.
// A queue consumer is a func over queue.Message that sqsbatch, the one SQS batch adapter, runs
// for Lambda and for the local stack; the domain packages import neither the events package nor
// the adapter. Only the adapters listed here may import the events package.
func TestDomainPackagesTakePlainMessages(t *testing.T) {
	const events = "github.com/aws/aws-lambda-go/events"
	adapters := map[string]string{
		"shared/sqsbatch":               "the SQS batch adapter of every queue consumer",
		"shared/queue":                  "Consumer, the local stand-in for Lambda's SQS event source mapping, builds the event",
		"shared/apigw":                  "the API Gateway HTTP API adapter",
		"shared/idempotency/idemlambda": "the Lambda idempotency library (Wrap for any event, SQS for a batch)",
		"shared/outbox/outboxlambda":    "the DynamoDB stream handler of the outbox relay",
	}
	domain := []string{"shared/payments", "shared/webhooks/worker", "shared/deadletter", "shared/outbox"}
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	g := deps(t, root, "./shared/...")
	for pkg, imports := range g {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok || !strings.HasPrefix(rel, "shared/") {
			continue
		}
		if _, adapter := adapters[rel]; !adapter && slices.Contains(imports, events) {
			t.Errorf("%s imports %s: take queue.Message (sqsbatch) or add an adapter package", rel, events)
		}
	}
	for _, d := range domain {
		imports, ok := g[module+d]
		if !ok {
			t.Fatalf("%s not listed", d)
		}
		for _, imp := range imports {
			if imp == events || imp == module+"shared/sqsbatch" {
				t.Errorf("%s imports %s", d, imp)
			}
		}
	}
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

// constructionExceptions are the named exceptions to the construction idiom
// (CONTRIBUTING.md, "Construction"), each with its reason. Everything else in shared/ is a struct
// built with a composite literal (or NewX(X) where building does work once).
var constructionExceptions = map[string]string{
	// Per-call options of idempotency.Do[T]: they vary by call, not by component.
	"idempotency.CallOption": "per-call options of Do",
	// Arguments of functions that build handlers (Wrap, SQS), not components; the Powertools
	// table in docs/library.md maps Powertools' options onto their fields.
	"idemlambda.Config": "the settings of Wrap and SQS",
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
			t.Errorf("exception %s no longer exists: remove it here and in CONTRIBUTING.md", name)
		}
	}
	t.Logf("%d packages, %d struct fields checked; %d named exceptions", len(pkgs), fields, len(excepted))
}
