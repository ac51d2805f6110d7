package problem

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// Every code declared in types.go has its status in the one table, and New gives the problem
// that status, its standard title and the code's type URI.
func TestEveryCodeHasItsStatus(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "types.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	codes := 0
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || vs.Names[0].Name == "TypeBase" {
				continue
			}
			code, _ := strconv.Unquote(lit.Value)
			codes++
			status, ok := statuses[code]
			if !ok {
				t.Errorf("%s (%q) has no status", vs.Names[0].Name, code)
				continue
			}
			p := New(code, "d")
			if p.Status != status || p.Title != http.StatusText(status) || p.Type != TypeBase+code || p.Detail != "d" {
				t.Errorf("New(%q) = %+v", code, p)
			}
		}
	}
	if codes != len(statuses) || codes < 20 {
		t.Fatalf("%d codes declared, %d in the table", codes, len(statuses))
	}
	if p := New("no-such-code", "d"); p.Status != http.StatusInternalServerError {
		t.Fatalf("an unknown code answers %d", p.Status)
	}
}

// RetryAfter is a header, never a member of the document.
func TestRetryAfterIsAHeader(t *testing.T) {
	rec := httptest.NewRecorder()
	p := New(KeyInProgress, "still running")
	p.RetryAfter = 2
	Write(rec, p)
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 409 || rec.Header().Get("Retry-After") != "2" || len(doc) != 4 {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	rec = httptest.NewRecorder()
	Write(rec, New(NotFound, "none"))
	if _, ok := rec.Header()["Retry-After"]; ok {
		t.Fatalf("Retry-After without a wait: %v", rec.Header())
	}
}

// The README's problem types table states each type's status: the table here is what it says.
func TestREADMEStatesEachStatus(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| <a id=\"problem-([a-z-]+)\"></a>`[a-z-]+` \\| (\\d{3}) \\|").FindAllSubmatch(readme, -1)
	if len(rows) < len(statuses) {
		t.Fatalf("%d rows in the README's problem table, %d types", len(rows), len(statuses))
	}
	seen := map[string]bool{}
	for _, row := range rows {
		code, status := string(row[1]), string(row[2])
		seen[code] = true
		if want, ok := statuses[code]; !ok || strconv.Itoa(want) != status {
			t.Errorf("README: %s is %s; the table says %d", code, status, want)
		}
	}
	for code := range statuses {
		if !seen[code] {
			t.Errorf("README has no row for %s", code)
		}
	}
}
