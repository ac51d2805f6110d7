package idempotency

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	cases := map[string]struct {
		key  string
		want error
	}{
		"empty":           {"", ErrKeyMissing},
		"one char":        {"a", nil},
		"uuid":            {"9f1c2a9e-6a43-4c1f-8c1d-1f0f5d1e2b3c", nil},
		"all visible":     {"!~#$%&'()*+,-./:;<=>?@[]^_`{|}", nil},
		"255":             {strings.Repeat("k", 255), nil},
		"256":             {strings.Repeat("k", 256), ErrKeyInvalid},
		"space":           {"a b", ErrKeyInvalid},
		"tab":             {"a\tb", ErrKeyInvalid},
		"newline":         {"a\nb", ErrKeyInvalid},
		"del":             {"a\x7fb", ErrKeyInvalid},
		"non-ascii":       {"clé", ErrKeyInvalid},
		"nul":             {"a\x00", ErrKeyInvalid},
		"leading space":   {" a", ErrKeyInvalid},
		"header-injected": {"a\r\nX-Evil: 1", ErrKeyInvalid},
	}
	for name, tc := range cases {
		if err := ValidateKey(tc.key); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

func TestScopedNeverCollides(t *testing.T) {
	pairs := [][2]string{{"a#b", "c"}, {"a", "b#c"}, {"a%23b", "c"}, {"", "a#b#c"}, {"a#", "b#c"}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := Scoped(p[0], p[1])
		if prev, ok := seen[k]; ok {
			t.Fatalf("%v and %v both scope to %q", prev, p, k)
		}
		seen[k] = p
	}
}

func TestDeriveIsDeterministicAndScoped(t *testing.T) {
	a := Derive("payment", "local", "k1")
	if a != Derive("payment", "local", "k1") {
		t.Fatal("Derive is not deterministic")
	}
	for _, other := range []string{Derive("provider", "local", "k1"), Derive("payment", "other", "k1"), Derive("payment", "local", "k2"), Derive("payment", "localk", "1")} {
		if other == a {
			t.Fatal("Derive collided across purpose, scope or key")
		}
	}
}

func TestFingerprintCanonical(t *testing.T) {
	base := `{"amount":1000,"currency":"usd","metadata":{"a":"1","b":"2"},"customer":"cus_1"}`
	same := []string{
		`{"currency":"usd","amount":1000,"customer":"cus_1","metadata":{"b":"2","a":"1"}}`,
		"{\n  \"amount\" : 1000 ,\t\"currency\":\"usd\",\"metadata\":{\"a\":\"1\",\"b\":\"2\"},\"customer\":\"cus_1\"}\n",
		`{"amount":1000,"currency":"\u0075sd","metadata":{"a":"1","b":"2"},"customer":"cus_1"}`,
	}
	different := map[string]string{
		"amount":           `{"amount":1001,"currency":"usd","metadata":{"a":"1","b":"2"},"customer":"cus_1"}`,
		"amount,currency":  `{"amount":1001,"currency":"eur","metadata":{"a":"1","b":"2"},"customer":"cus_1"}`,
		"metadata":         `{"amount":1000,"currency":"usd","metadata":{"a":"1"},"customer":"cus_1"}`,
		"description":      `{"amount":1000,"currency":"usd","metadata":{"a":"1","b":"2"},"customer":"cus_1","description":"x"}`,
		"amount (literal)": `{"amount":1000.0,"currency":"usd","metadata":{"a":"1","b":"2"},"customer":"cus_1"}`,
	}
	want, err := FingerprintJSON([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range same {
		got, err := FingerprintJSON([]byte(s))
		if err != nil || got.Sum != want.Sum || got.Diff(want) != nil {
			t.Errorf("%s: fingerprint differs (%v)", s, err)
		}
	}
	for name, s := range different {
		got, err := FingerprintJSON([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Join(got.Diff(want), ",")
		wantFields := strings.TrimSuffix(name, " (literal)")
		if got.Sum == want.Sum || fields != wantFields {
			t.Errorf("%s: diff %q", name, fields)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1} {"b":2}`, `nope`} {
		if _, err := FingerprintJSON([]byte(bad)); !errors.Is(err, ErrNotJSON) {
			t.Errorf("%q: got %v, want ErrNotJSON", bad, err)
		}
	}
	// Non-object bodies differ without naming fields.
	a, _ := FingerprintJSON([]byte(`[1,2]`))
	b, _ := FingerprintJSON([]byte(`[2,1]`))
	if d := a.Diff(b); d == nil || len(d) != 0 {
		t.Fatalf("array diff %v, want empty non-nil", d)
	}
}

func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"", "a", "a b", strings.Repeat("x", 256), "clé", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateKey(key)
		ok := len(key) >= 1 && len(key) <= 255
		for i := 0; i < len(key); i++ {
			ok = ok && key[i] > 0x20 && key[i] < 0x7f
		}
		if ok != (err == nil) {
			t.Fatalf("ValidateKey(%q) = %v, want ok=%v", key, err, ok)
		}
	})
}

// FuzzFingerprint checks the canonical form: the canonical text, and an indented re-encoding
// of the same decoded value, fingerprint exactly like the original body; fingerprinting never
// panics.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{`{"amount":1,"currency":"usd"}`, `[1,"a",null,true]`, `"x"`, `{"a":{"b":[1.5e3]}}`, `{`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fp, err := FingerprintJSON(body)
		if err != nil {
			return
		}
		v, err := decodeOne(body)
		if err != nil {
			t.Fatalf("fingerprinted but does not decode: %v", err)
		}
		canon, err := canonical(v)
		if err != nil {
			t.Fatal(err)
		}
		indented, err := json.MarshalIndent(v, " ", "\t")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{canon, indented} {
			fp2, err := FingerprintJSON(b)
			if err != nil {
				t.Fatalf("re-encoded body %q does not fingerprint: %v", b, err)
			}
			if fp2.Sum != fp.Sum || fp2.Diff(fp) != nil {
				t.Fatalf("layout changed the fingerprint: %q vs %q", body, b)
			}
		}
	})
}
