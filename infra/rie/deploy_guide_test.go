package rie_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/stripeprovider"
)

// tableAfter returns the body rows of the markdown table that follows marker in doc, each as
// its trimmed cells.
func tableAfter(t *testing.T, doc, marker string) [][]string {
	t.Helper()
	i := strings.Index(doc, marker)
	if i < 0 {
		t.Fatalf("docs/deploy.md has no %q", marker)
	}
	var rows [][]string
	started := false
	for line := range strings.Lines(doc[i+len(marker):]) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	// The rows below the separator (|---|---|); the header above it may be the marker itself.
	sep := slices.IndexFunc(rows, func(r []string) bool { return strings.Trim(r[0], ":-") == "" && r[0] != "" })
	if sep < 0 {
		t.Fatalf("no table after %q", marker)
	}
	return rows[sep+1:]
}

// TestDeployGuide holds docs/deploy.md to what it documents: every parameter of template.yaml
// is in its parameter table and every SSM parameter name in its secrets table; every SSM name
// the template or samconfig.toml gives a stage is one the guide's put-parameter commands create
// for that stage;
// the Stripe webhook events it enables (the list and the command) are exactly the ones the
// webhook worker applies; the restricted key's permissions are exactly what the adapter's calls
// need; and it names the Stripe API version stripe-go pins.
func TestDeployGuide(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	doc, tmpl, samconfig := read("docs/deploy.md"), read("template.yaml"), read("samconfig.toml")

	var parsed struct {
		Parameters yaml.Node `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal([]byte(tmpl), &parsed); err != nil {
		t.Fatal(err)
	}
	var params []string
	for i := 0; i+1 < len(parsed.Parameters.Content); i += 2 {
		params = append(params, parsed.Parameters.Content[i].Value)
	}
	if len(params) < 10 {
		t.Fatalf("template.yaml parameters: %v", params)
	}

	t.Run("template parameters", func(t *testing.T) {
		documented := map[string]bool{}
		for _, row := range tableAfter(t, doc, "<!-- template-parameters") {
			documented[strings.Trim(row[0], "`")] = true
		}
		for _, p := range params {
			if !documented[p] {
				t.Errorf("template.yaml's parameter %s is not in docs/deploy.md's parameter table", p)
			}
		}
	})

	// The SSM names the guide's put-parameter commands create, per stage.
	created := map[string]bool{}
	for _, m := range regexp.MustCompile(`put-parameter [^\n]*--name "(/twice/\$STAGE/[a-z0-9-]+)"`).FindAllStringSubmatch(doc, -1) {
		created[m[1]] = true
	}
	t.Run("SSM parameters", func(t *testing.T) {
		rows := map[string]string{}
		for _, row := range tableAfter(t, doc, "| template parameter | SSM parameter it names |") {
			rows[strings.Trim(row[0], "`")] = row[1]
		}
		for _, p := range params {
			if !strings.HasSuffix(p, "Parameter") {
				continue
			}
			ssm, ok := rows[p]
			if !ok {
				t.Errorf("%s names an SSM parameter; the guide's secrets table lacks it", p)
				continue
			}
			name := regexp.MustCompile("`(/twice/<stage>/[a-z0-9-]+)`").FindStringSubmatch(ssm)
			if name == nil || !created[strings.ReplaceAll(name[1], "<stage>", "$STAGE")] {
				t.Errorf("%s: the guide has no put-parameter command for %q", p, ssm)
			}
		}
		// Every name the template gives a stage's parameter is one the guide creates.
		for _, m := range regexp.MustCompile(`!Sub "/twice/\$\{Stage\}/([a-z0-9-]+)"`).FindAllStringSubmatch(tmpl, -1) {
			if !created["/twice/$STAGE/"+m[1]] {
				t.Errorf("template.yaml reads /twice/<stage>/%s; the guide has no put-parameter command for it", m[1])
			}
		}
		// Every stage's samconfig names only parameters the guide creates for that stage.
		pair := regexp.MustCompile(`(\w+)=\\"([^"\\]*)\\"`)
		stages := 0
		for line := range strings.Lines(samconfig) {
			v, ok := strings.CutPrefix(strings.TrimSpace(line), "parameter_overrides = ")
			if !ok {
				continue
			}
			kv := map[string]string{}
			for _, m := range pair.FindAllStringSubmatch(v, -1) {
				kv[m[1]] = m[2]
			}
			stage := kv["Stage"]
			if stage == "" {
				t.Errorf("samconfig.toml overrides without a Stage: %s", v)
				continue
			}
			stages++
			for k, name := range kv {
				if !strings.HasSuffix(k, "Parameter") || name == "" {
					continue
				}
				if !created[strings.Replace(name, "/twice/"+stage+"/", "/twice/$STAGE/", 1)] {
					t.Errorf("samconfig.toml, stage %s: %s=%s is not a parameter the guide creates for the stage", stage, k, name)
				}
			}
		}
		if stages == 0 {
			t.Error("no parameter_overrides in samconfig.toml")
		}
	})

	t.Run("Stripe webhook events", func(t *testing.T) {
		block := regexp.MustCompile("(?s)```stripe-events\n(.*?)```").FindStringSubmatch(doc)
		if block == nil {
			t.Fatal("docs/deploy.md has no ```stripe-events block")
		}
		listed := strings.Fields(block[1])
		want := slices.Sorted(slices.Values(payments.StripeEventTypes))
		if got := slices.Sorted(slices.Values(listed)); !slices.Equal(got, want) {
			t.Errorf("the guide's events %v, the worker applies %v", got, want)
		}
		cmd := regexp.MustCompile(`(?s)EVENTS=\((.*?)\)`).FindStringSubmatch(doc)
		if cmd == nil {
			t.Fatal("docs/deploy.md has no EVENTS=(...) for the endpoint")
		}
		if got := slices.Sorted(slices.Values(strings.Fields(cmd[1]))); !slices.Equal(got, want) {
			t.Errorf("the endpoint command enables %v, the worker applies %v", got, want)
		}
	})

	t.Run("restricted key permissions", func(t *testing.T) {
		want := map[string]string{}
		for _, e := range stripeprovider.Endpoints {
			for _, p := range e.Permissions {
				resource, access, _ := strings.Cut(p, " ")
				if want[resource] != "Write" {
					want[resource] = strings.ToUpper(access[:1]) + access[1:]
				}
			}
		}
		got := map[string]string{}
		for _, row := range tableAfter(t, doc, "<!-- stripe-permissions") {
			got[row[0]] = row[1]
		}
		for r, a := range want {
			if got[r] != a {
				t.Errorf("the adapter needs %s %s; the guide says %q", r, a, got[r])
			}
		}
		for r, a := range got {
			if _, ok := want[r]; !ok {
				t.Errorf("the guide grants %s %s, which no call of the adapter needs", r, a)
			}
		}
	})

	t.Run("Stripe API version", func(t *testing.T) {
		for _, want := range []string{"`" + stripeprovider.APIVersion + "`", "api_version=" + stripeprovider.APIVersion} {
			if !strings.Contains(doc, want) {
				t.Errorf("docs/deploy.md lacks %q (stripe-go's pinned version)", want)
			}
		}
	})
}
