package ssmparam

import (
	"errors"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/secrets"
)

// FuzzDecode: any answer decodes to a value or to one of the secrets sentinels, and an error
// never carries the body (which could hold a value).
func FuzzDecode(f *testing.F) {
	f.Add(200, []byte(`{"Parameter":{"Value":"whsec_x"}}`))
	f.Add(400, []byte(`{"__type":"ParameterNotFound"}`))
	f.Add(500, []byte(`{"__type":"x#InternalServerError","message":"whsec_leak"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		_, err := decode("/p", status, body)
		if err == nil {
			return
		}
		if !errors.Is(err, secrets.ErrNotFound) && !errors.Is(err, secrets.ErrUnavailable) && !errors.Is(err, secrets.ErrEmpty) {
			t.Fatalf("unclassified error %v", err)
		}
		if strings.Contains(err.Error(), "whsec_leak") {
			t.Fatalf("error carries the body: %v", err)
		}
	})
}
