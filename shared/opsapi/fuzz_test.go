package opsapi_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/runtwice/twice/shared/deadletter"
	"github.com/runtwice/twice/shared/opsapi"
)

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{
		"", "status=open", "status=retrying&source=webhook&class=decline_limit",
		"from=2026-11-01&to=2026-11-29", "from=2026-11-29T08:00:00Z&to=2026-11-01", "q=pay_123&limit=20",
		"cursor=" + deadletter.EncodeCursor("2026-11-29T08:00:00.000000000Z#dl_x"), "cursor=%%%", "limit=0", "limit=99999",
		"status=open&status=ignored", "zzz=1", "q=" + strings.Repeat("x", 300), "from=0001-01-01",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, err := opsapi.ParseFilter(q)
		if err != nil {
			if !errors.Is(err, deadletter.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if flt.Status != "" && !flt.Status.Valid() {
			t.Fatalf("invalid status accepted: %q", flt.Status)
		}
		if flt.Limit < 0 || flt.Limit > deadletter.MaxLimit {
			t.Fatalf("limit %d accepted", flt.Limit)
		}
		if !flt.From.IsZero() && !flt.To.IsZero() && flt.To.Before(flt.From) {
			t.Fatalf("inverted range accepted")
		}
		if flt.Cursor != "" {
			if _, err := deadletter.DecodeCursor(flt.Cursor); err != nil {
				t.Fatalf("cursor accepted but does not decode: %v", err)
			}
		}
	})
}

func FuzzParseActionBody(f *testing.F) {
	for _, s := range []string{
		"", `{}`, `{"outcome":"paid","note":"by transfer"}`, `{"note":"x"}`, `{"outcome":1}`, `{"x":1}`,
		`{"note":"a"}{"note":"b"}`, `[]`, `null`, `{"note":"` + strings.Repeat("n", 3000) + `"}`, "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		b, err := opsapi.ParseActionBody(strings.NewReader(raw))
		if err != nil {
			if !errors.Is(err, deadletter.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			if b != (opsapi.ActionBody{}) {
				t.Fatalf("a refused body returned fields: %+v", b)
			}
			return
		}
		if len(b.Note) > deadletter.MaxNote || len(b.Result) > deadletter.MaxResult {
			t.Fatalf("over-long fields accepted")
		}
	})
}
