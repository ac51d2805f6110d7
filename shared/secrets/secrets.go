package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Errors. They name the secret, never its value.
var (
	// ErrNotFound: no secret under that name.
	ErrNotFound = errors.New("secrets: not found")
	// ErrEmpty: the secret exists but holds no value after splitting.
	ErrEmpty = errors.New("secrets: empty")
	// ErrUnavailable: the backing store failed and no earlier value is cached.
	ErrUnavailable = errors.New("secrets: unavailable")
)

// Split reads one stored value as the list of active secrets: entries separated by commas or
// newlines, surrounding space trimmed, empties dropped. During a rotation the parameter holds the
// new and the old secret ("whsec_new,whsec_old"); neither whsec_ secrets nor Standard Webhooks'
// base64 alphabet contain a comma or a newline.
func Split(value string) []string {
	f := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' })
	out := f[:0]
	for _, s := range f {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Static serves fixed secrets, for local runs and tests.
type Static map[string][]string

// Secrets returns the secrets stored under name.
func (s Static) Secrets(_ context.Context, name string) ([]string, error) {
	v, ok := s[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrEmpty, name)
	}
	return v, nil
}

// FromEnv builds a Static source: for each secret name, the value of its environment variable
// (read through lookup, e.g. os.LookupEnv) split with Split, or the default when unset.
// Names whose variable is unset and that have no default are left out.
func FromEnv(lookup func(string) (string, bool), vars map[string]EnvVar) Static {
	s := Static{}
	for name, ev := range vars {
		val, ok := lookup(ev.Name)
		if !ok {
			val = ev.Default
		}
		if v := Split(val); len(v) > 0 {
			s[name] = v
		}
	}
	return s
}

// EnvVar names an environment variable and the value used when it is unset.
type EnvVar struct {
	Name    string
	Default string
}
