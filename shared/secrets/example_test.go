package secrets_test

import (
	"context"
	"fmt"

	"github.com/runtwice/twice/shared/secrets"
)

// Locally, secrets come from the environment with documented defaults; a rotation is two
// values in one variable.
func ExampleFromEnv() {
	env := map[string]string{"TWICE_STRIPE_WEBHOOK_SECRET": "whsec_new,whsec_old"}
	src := secrets.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, map[string]secrets.EnvVar{
		"stripe":   {Name: "TWICE_STRIPE_WEBHOOK_SECRET", Default: "whsec_local"},
		"standard": {Name: "TWICE_STANDARD_WEBHOOK_SECRET", Default: "whsec_bG9jYWwtc3RhbmRhcmQtc2VjcmV0"},
	})
	s, _ := src.Secrets(context.Background(), "stripe")
	fmt.Println(len(s), "stripe secrets active")
	s, _ = src.Secrets(context.Background(), "standard")
	fmt.Println(len(s), "standard secret active (the default)")
	// Output:
	// 2 stripe secrets active
	// 1 standard secret active (the default)
}
