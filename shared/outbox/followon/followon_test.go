package followon_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/outbox/followon"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/store"
)

const (
	module     = "github.com/runtwice/twice"
	outboxPath = module + "/shared/outbox"
	root       = "../../.."
)

// writtenKinds reads the Go source under dirs (relative to the repository root, tests left
// out) and returns the kind of every outbox.New and outbox.NewAt call, with where it is written. A kind that is
// not a string constant (or literal) is reported as an error: the registry could not be held
// to it.
func writtenKinds(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	type ref struct{ pkg, name string }
	consts := map[ref]string{}
	type call struct {
		at   string
		kind ref
		lit  string
	}
	var calls []call
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			pkg := module + "/" + filepath.ToSlash(rel)
			imports := map[string]string{}
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				name := p[strings.LastIndexByte(p, '/')+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				imports[name] = p
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GenDecl:
					if n.Tok != token.CONST {
						return true
					}
					for _, spec := range n.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, name := range vs.Names {
							if i < len(vs.Values) {
								if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
									consts[ref{pkg, name.Name}], _ = strconv.Unquote(lit.Value)
								}
							}
						}
					}
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || (sel.Sel.Name != "New" && sel.Sel.Name != "NewAt") || len(n.Args) == 0 {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); !ok || imports[x.Name] != outboxPath {
						return true
					}
					c := call{at: fset.Position(n.Pos()).String()}
					switch k := n.Args[0].(type) {
					case *ast.Ident:
						c.kind = ref{pkg, k.Name}
					case *ast.SelectorExpr:
						if x, ok := k.X.(*ast.Ident); ok {
							c.kind = ref{imports[x.Name], k.Sel.Name}
						}
					case *ast.BasicLit:
						c.lit, _ = strconv.Unquote(k.Value)
					}
					calls = append(calls, c)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	written := map[string]string{}
	for _, c := range calls {
		kind, ok := c.lit, c.lit != ""
		if !ok {
			kind, ok = consts[c.kind]
		}
		if !ok {
			t.Errorf("%s: the kind of outbox.New is not a string constant", c.at)
			continue
		}
		written[kind] = c.at
	}
	if len(written) == 0 {
		t.Fatal("no outbox.New call found: the source walk is broken")
	}
	return written
}

// TestEveryKindWrittenHasItsHandler: the kinds the code writes (every outbox.New in shared/ and
// functions/) are exactly the kinds the registry delivers. A kind written without a handler
// would wait in the outbox for ever; a handler of a kind nothing writes serves a form nobody
// uses.
func TestEveryKindWrittenHasItsHandler(t *testing.T) {
	written := writtenKinds(t, "shared", "functions")
	kinds := followon.Kinds()
	for kind, at := range written {
		if !slices.Contains(kinds, kind) {
			t.Errorf("kind %q (written at %s) has no handler in the registry", kind, at)
		}
	}
	for _, kind := range kinds {
		if _, ok := written[kind]; !ok {
			t.Errorf("the registry delivers kind %q, which nothing writes", kind)
		}
	}
}

type (
	noStore    struct{ store.Store }
	resolver   struct{}
	decline    struct{}
	starter    struct{}
	sender     struct{}
	publishing struct{}
)

func (resolver) EnqueueResolve(context.Context, payments.ResolveJob) error     { return nil }
func (decline) Declined(context.Context, payments.Payment) error               { return nil }
func (starter) Start(context.Context, string, []byte) error                    { return nil }
func (publishing) Publish(context.Context, feed.Event, store.Write) error      { return nil }
func (sender) Send(context.Context, []byte, queue.SendOptions) (string, error) { return "m", nil }

func targets() followon.Targets {
	st := noStore{}
	return followon.Targets{
		Payments:     &payments.Service{Store: st, Resolver: resolver{}, OnDecline: decline{}},
		Steerer:      &recovery.Steerer{Store: st, Starter: starter{}},
		DeadLetters:  &deadletter.Records{Store: st, Requeuer: deadletter.RequeueFunc(func(context.Context, deadletter.Target, string) error { return nil })},
		WebhookQueue: sender{},
		Publisher:    &feed.Publisher{Store: st, Sink: publishing{}},
	}
}

// Handlers registers every kind once, and refuses targets a kind could not be delivered to.
func TestHandlersNeedEveryTarget(t *testing.T) {
	tests := map[string]func(*followon.Targets){
		"complete":                  func(*followon.Targets) {},
		"no payments service":       func(t *followon.Targets) { t.Payments = nil },
		"no resolver":               func(t *followon.Targets) { t.Payments.Resolver = nil },
		"no recovery starter":       func(t *followon.Targets) { t.Payments.OnDecline = nil },
		"a steerer without starter": func(t *followon.Targets) { t.Steerer.Starter = nil },
		"a table without requeuer":  func(t *followon.Targets) { t.DeadLetters.Requeuer = nil },
		"no webhook queue":          func(t *followon.Targets) { t.WebhookQueue = nil },
		"a publisher without sink":  func(t *followon.Targets) { t.Publisher.Sink = nil },
		"a publisher without store": func(t *followon.Targets) { t.Publisher.Store = nil },
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			tg := targets()
			change(&tg)
			h, err := followon.Handlers(tg)
			if name != "complete" {
				if !errors.Is(err, followon.ErrMissingTarget) || h != nil {
					t.Fatalf("handlers %v, error %v: want ErrMissingTarget", h, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for kind, f := range h {
				if f == nil {
					t.Errorf("kind %q has a nil handler", kind)
				}
				got = append(got, kind)
			}
			slices.Sort(got)
			if !slices.Equal(got, followon.Kinds()) {
				t.Fatalf("registered %v, Kinds says %v", got, followon.Kinds())
			}
		})
	}
}
