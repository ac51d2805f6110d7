package rie

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Grants is what template.yaml lets one function do and what its environment names.
type Grants struct {
	// Actions are the function's explicit policy statements as Calls on the template's logical
	// ids: "PaymentsTable", "PaymentsTable/index/gsi1", "ResolveQueue", "RecoveryStateMachine".
	Actions map[Call]bool
	// Env maps each environment variable set with !Ref to the logical id it names
	// (TWICE_TABLE_PAYMENTS -> PaymentsTable).
	Env map[string]string
}

// TemplateGrants reads every AWS::Serverless::Function of the template, keyed by the function
// name's suffix after the stage (twice-${Stage}-payments-api -> payments-api).
func TemplateGrants(path string) (map[string]Grants, error) {
	resources, err := templateResources(path)
	if err != nil {
		return nil, err
	}
	out := map[string]Grants{}
	for i := 0; resources != nil && i+1 < len(resources.Content); i += 2 {
		r := resources.Content[i+1]
		if t := get(r, "Type"); t == nil || t.Value != "AWS::Serverless::Function" {
			continue
		}
		props := get(r, "Properties")
		name := get(props, "FunctionName")
		if name == nil {
			continue
		}
		fn := name.Value[strings.LastIndex(name.Value, "}-")+2:]
		g := Grants{Actions: map[Call]bool{}, Env: map[string]string{}}
		if vars := get(get(get(props, "Environment"), "Variables")); vars != nil {
			for j := 0; j+1 < len(vars.Content); j += 2 {
				if v := vars.Content[j+1]; v.Tag == "!Ref" {
					g.Env[vars.Content[j].Value] = v.Value
				}
			}
		}
		if pols := get(props, "Policies"); pols != nil {
			for _, pol := range pols.Content {
				st := get(pol, "Statement")
				if st == nil {
					continue // a SAM policy template: the test refuses those separately
				}
				for _, s := range st.Content {
					for _, a := range scalars(get(s, "Action")) {
						for _, res := range resourcesOf(get(s, "Resource")) {
							g.Actions[Call{Action: a, Resource: res}] = true
						}
					}
				}
			}
		}
		out[fn] = g
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("rie: no functions in %s", path)
	}
	return out, nil
}

// PolicyTemplates lists the SAM policy templates (DynamoDBCrudPolicy, ...) a function uses;
// they grant by table name with actions the code may never call.
func PolicyTemplates(path string) (map[string][]string, error) {
	resources, err := templateResources(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i := 0; resources != nil && i+1 < len(resources.Content); i += 2 {
		props := get(resources.Content[i+1], "Properties")
		for _, pol := range contentOf(get(props, "Policies")) {
			if pol.Kind == yaml.MappingNode && get(pol, "Statement") == nil && len(pol.Content) > 0 && pol.Content[0].Value != "Version" {
				out[resources.Content[i].Value] = append(out[resources.Content[i].Value], pol.Content[0].Value)
			}
		}
	}
	return out, nil
}

// templateResources parses the template (keeping its !Ref and !GetAtt tags) and returns its
// Resources mapping.
func templateResources(path string) (*yaml.Node, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	r := get(get(&doc), "Resources")
	if r == nil {
		return nil, fmt.Errorf("rie: no Resources in %s", path)
	}
	return r, nil
}

var subRef = regexp.MustCompile(`^\$\{([A-Za-z0-9]+)(?:\.Arn)?\}(.*)$`)

// resourcesOf turns !GetAtt X.Arn, !Ref X and !Sub "${X.Arn}/index/gsi1" into logical ids
// ("X", "X/index/gsi1"); ARNs of parameters and other strings are kept as written.
func resourcesOf(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.SequenceNode {
		var out []string
		for _, c := range n.Content {
			out = append(out, resourcesOf(c)...)
		}
		return out
	}
	switch n.Tag {
	case "!GetAtt":
		return []string{strings.TrimSuffix(n.Value, ".Arn")}
	case "!Ref":
		return []string{n.Value}
	case "!Sub":
		if m := subRef.FindStringSubmatch(n.Value); m != nil {
			return []string{m[1] + m[2]}
		}
	}
	return []string{n.Value}
}

func scalars(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, c.Value)
	}
	return out
}

func contentOf(n *yaml.Node) []*yaml.Node {
	if n == nil {
		return nil
	}
	return n.Content
}

// get returns the value of key in mapping n (or, with no key, n's document content).
func get(n *yaml.Node, key ...string) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if len(key) == 0 {
		return n
	}
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key[0] {
			return n.Content[i+1]
		}
	}
	return nil
}
