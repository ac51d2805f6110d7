package backfill

import (
	"errors"
	"testing"
)

func TestParseRequest(t *testing.T) {
	cases := map[string]struct {
		raw  string
		want Request
		bad  bool
	}{
		"empty":      {raw: ""},
		"null":       {raw: "null"},
		"scheduled":  {raw: "{}"},
		"since":      {raw: `{"since":"2027-06-06T00:00:00Z","undelivered_only":true}`, want: Request{Since: "2027-06-06T00:00:00Z", UndeliveredOnly: true}},
		"bad time":   {raw: `{"since":"yesterday"}`, bad: true},
		"unknown":    {raw: `{"from":"2027-06-06T00:00:00Z"}`, bad: true},
		"trailing":   {raw: `{} {}`, bad: true},
		"wrong type": {raw: `{"undelivered_only":"yes"}`, bad: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRequest([]byte(c.raw))
			if c.bad {
				if !errors.Is(err, ErrBadRequest) {
					t.Fatalf("err %v, want ErrBadRequest", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v %v, want %+v", got, err, c.want)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"", "{}", `{"since":"2027-06-06T00:00:00Z"}`, `{"undelivered_only":true}`, `[`, `{"since":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := ParseRequest(raw)
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Fatalf("error %v is not ErrBadRequest", err)
		}
		if err == nil && len(r.Since) > 64 {
			t.Fatalf("accepted a since of %d bytes", len(r.Since))
		}
	})
}
