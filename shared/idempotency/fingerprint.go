package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
)

// ErrNotJSON means a body could not be canonicalised because it is not one JSON value.
var ErrNotJSON = errors.New("idempotency: body is not a JSON value")

// Fingerprint identifies a request body independent of key order and white space. Sum covers
// the whole body; Fields holds one hash per top-level member of an object body, so a mismatch
// can name the fields that differ without storing the body itself.
type Fingerprint struct {
	Sum    string            `json:"sum"`
	Fields map[string]string `json:"fields,omitempty"`
}

// FingerprintJSON canonicalises body (objects with sorted keys, no insignificant white space,
// numbers kept as written, strings re-encoded) and hashes it with SHA-256.
func FingerprintJSON(body []byte) (Fingerprint, error) {
	v, err := decodeOne(body)
	if err != nil {
		return Fingerprint{}, err
	}
	canon, err := canonical(v)
	if err != nil {
		return Fingerprint{}, err
	}
	fp := Fingerprint{Sum: sum(canon)}
	if obj, ok := v.(map[string]any); ok {
		fp.Fields = make(map[string]string, len(obj))
		for k, fv := range obj {
			c, err := canonical(fv)
			if err != nil {
				return Fingerprint{}, err
			}
			fp.Fields[k] = sum(c)[:16]
		}
	}
	return fp, nil
}

// FingerprintBytes hashes an opaque body as is, for requests that are not JSON.
func FingerprintBytes(body []byte) Fingerprint {
	return Fingerprint{Sum: sum(body)}
}

// Diff names the top-level fields whose values differ between two fingerprints, sorted. It
// returns nil when the fingerprints are equal, and an empty, non-nil slice when they differ but
// no field can be named (a non-object body).
func (f Fingerprint) Diff(other Fingerprint) []string {
	if f.Sum == other.Sum {
		return nil
	}
	diff := []string{}
	for _, k := range slices.Sorted(maps.Keys(union(f.Fields, other.Fields))) {
		if f.Fields[k] != other.Fields[k] {
			diff = append(diff, k)
		}
	}
	return diff
}

func union(a, b map[string]string) map[string]bool {
	u := make(map[string]bool, len(a)+len(b))
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func decodeOne(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", ErrNotJSON)
	}
	return v, nil
}

// canonical re-encodes a decoded value. encoding/json sorts map keys and writes no white
// space; json.Number keeps the number's literal, so 10 and 10.0 stay different values.
func canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
