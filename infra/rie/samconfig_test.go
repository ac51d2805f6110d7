package rie_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/runtwice/twice/infra/rie"
)

// secretParams are template.yaml's SecureString parameters and the name each takes in a stage
// when left empty (/twice/<stage>/<name>); "" for the optional client secret, which has none.
var secretParams = map[string]string{
	"StripeApiKeyParameter":            "stripe-api-key",
	"StripeWebhookSecretParameter":     "stripe-webhook-secret",
	"StandardWebhookSecretParameter":   "standard-webhook-secret",
	"ConsoleSessionKeyParameter":       "ops-session-key",
	"ConsoleOidcClientSecretParameter": "",
}

// TestSamconfigSecretsPerStage reads samconfig.toml's environments and the SecureString
// parameter names each deploys with (its override, or the template's per-stage default). It
// fails when two environments share a name (one stage would read another's secret) or when a
// stage's name does not carry its own stage, and when the template's default for a secret is
// not empty (the stage's own name).
func TestSamconfigSecretsPerStage(t *testing.T) {
	root, err := rie.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	defaults := templateDefaults(t, filepath.Join(root, "template.yaml"))
	for p := range secretParams {
		d, ok := defaults[p]
		if !ok {
			t.Errorf("template.yaml has no parameter %s", p)
		} else if d != "" {
			t.Errorf("template.yaml: %s defaults to %q; want empty (the stage's own name)", p, d)
		}
	}

	envs := samconfigOverrides(t, filepath.Join(root, "samconfig.toml"))
	if len(envs) < 2 {
		t.Fatalf("samconfig.toml: %d environments with parameter_overrides; want dev and prod at least", len(envs))
	}
	owner := map[string]string{} // parameter name -> environment
	for env, over := range envs {
		stage, ok := over["Stage"]
		if !ok {
			stage = defaults["Stage"]
		}
		for p, suffix := range secretParams {
			name, ok := over[p]
			if !ok || name == "" {
				if suffix == "" {
					continue // no client secret: a public client
				}
				name = "/twice/" + stage + "/" + suffix
			}
			if !strings.Contains(name+"/", "/"+stage+"/") {
				t.Errorf("[%s] (stage %s): %s is %s, which is not the stage's", env, stage, p, name)
			}
			if other, ok := owner[name]; ok {
				t.Errorf("[%s] and [%s] share the SecureString %s (%s)", env, other, name, p)
			}
			owner[name] = env
			t.Logf("[%s] stage %s: %s = %s", env, stage, p, name)
		}
	}
}

// templateDefaults is each template parameter's Default ("" when it has none).
func templateDefaults(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Parameters map[string]struct {
			Default string `yaml:"Default"`
		} `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range doc.Parameters {
		out[k] = v.Default
	}
	return out
}

var (
	tomlTable    = regexp.MustCompile(`^\[([A-Za-z0-9_-]+)\.deploy\.parameters\]\s*$`)
	tomlOverride = regexp.MustCompile(`^parameter_overrides\s*=\s*("(?:[^"\\]|\\.)*")\s*$`)
	overridePair = regexp.MustCompile(`([A-Za-z0-9]+)=(?:"((?:[^"\\]|\\.)*)"|(\S+))`)
)

// samconfigOverrides reads each environment's deploy parameter_overrides from samconfig.toml
// (the subset of TOML that file uses: tables and basic strings) into Name -> value.
func samconfigOverrides(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]string{}
	env := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			env = ""
			if m := tomlTable.FindStringSubmatch(line); m != nil {
				env = m[1]
			}
			continue
		}
		m := tomlOverride.FindStringSubmatch(line)
		if env == "" || m == nil {
			continue
		}
		s, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatalf("samconfig.toml [%s]: parameter_overrides: %v", env, err)
		}
		over := map[string]string{}
		for _, p := range overridePair.FindAllStringSubmatch(s, -1) {
			v := p[3]
			if p[2] != "" || p[3] == "" {
				v = strings.ReplaceAll(p[2], `\"`, `"`)
			}
			over[p[1]] = v
		}
		out[env] = over
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
