package opsapi

import "testing"

func TestOIDCGroupClaim(t *testing.T) {
	tests := map[string]struct {
		login  *OIDCLogin
		claims map[string]any
		want   bool
	}{
		"in the list":             {&OIDCLogin{Group: "ops"}, map[string]any{"groups": []any{"dev", "ops"}}, true},
		"not in the list":         {&OIDCLogin{Group: "ops"}, map[string]any{"groups": []any{"dev"}}, false},
		"no claim":                {&OIDCLogin{Group: "ops"}, map[string]any{"sub": "x"}, false},
		"cognito claim":           {&OIDCLogin{Group: "ops", GroupClaim: "cognito:groups"}, map[string]any{"cognito:groups": []any{"ops"}}, true},
		"space-separated scope":   {&OIDCLogin{Group: "twice/ops", GroupClaim: "scope"}, map[string]any{"scope": "openid twice/ops"}, true},
		"a prefix is not a match": {&OIDCLogin{Group: "ops"}, map[string]any{"groups": "opsx"}, false},
		"non-string members":      {&OIDCLogin{Group: "ops"}, map[string]any{"groups": []any{1, nil}}, false},
		"no group configured":     {&OIDCLogin{}, map[string]any{}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.login.admits(tc.claims); got != tc.want {
				t.Fatalf("admits = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestActorNameKeepsTheSessionFormat(t *testing.T) {
	for in, want := range map[string]string{"abc-123": "abc-123", "a|b c\x00d": "abcd", "": "unknown"} {
		if got := actorName(in); got != want {
			t.Errorf("actorName(%q) = %q, want %q", in, got, want)
		}
	}
}
