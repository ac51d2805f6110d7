package attempts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/shared/boltstore"
	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/redact"
	"github.com/runtwice/twice/shared/redact/redacttest"
)

func TestCardNumberKeyMaskedInLogsAndStore(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(redact.LogHandler(slog.NewJSONHandler(&buf, nil)))
	log.With("scope", "local").Info("key created", "key", "k#local#4242424242424242", "err", errors.New("sk_live_abc"),
		slog.Group("g", "n", int64(4242424242424242)), "huge", strings.Repeat("x", 200<<10))
	line := buf.String()
	if strings.Contains(line, "4242424242424242") || !strings.Contains(line, "k#local#[card ****4242]") ||
		strings.Contains(line, "sk_live_abc") || len(line) > 2<<10 || !strings.Contains(line, "bytes]") {
		t.Errorf("log line %d bytes: %.600s", len(line), line)
	}

	c := clock.NewFake(t0)
	l, _ := newLog(t, Log{}, c)
	ctx := context.Background()
	if err := l.Record(ctx, Attempt{Direction: Inbound, IdempotencyKey: "4242 4242 4242 4242", PaymentID: "pay_1"}); err != nil {
		t.Fatal(err)
	}
	page, err := l.Lookup(ctx, ByIdempotencyKey, "4242 4242 4242 4242", "")
	if err != nil || len(page.Attempts) != 1 || page.Attempts[0].IdempotencyKey != "[card ****4242]" {
		t.Fatalf("lookup by a card-number key: %v %+v", err, page)
	}
}

// FuzzRecordNoLeak is the redaction engine's property: whatever an attempt carries, in any
// field, no Luhn-valid 13-19 digit card number (groups joined by space, -, . or /), no secret
// pattern and no value under a sensitive field name survives in any stored field or in the
// log line written of it.
func FuzzRecordNoLeak(f *testing.F) {
	for i, s := range redacttest.Seeds {
		f.Add(s, s, "X-Note", s, []byte(s), "application/json", s, uint8(i))
	}
	f.Add("4242.4242.4242.4242", "evt_1", "4242/4242/4242/4242", "v", []byte(`{"card_cvc":"x"}`), "", "err", uint8(3))
	f.Add("k", "4242-4242-4242-4242", "Cookie", "a=1", []byte("card[security_code]=1&n=4242.4242.4242.4242"),
		"application/x-www-form-urlencoded", "e", uint8(5))
	// An unsynced file: the property is about what is written, and fsyncs would make the fuzzer
	// (and its minimisation) crawl.
	db, err := bolt.Open(filepath.Join(f.TempDir(), "fuzz.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	c := clock.NewFake(t0)
	l, err := NewLog(Log{Store: boltstore.New(db), PageSize: 3, Now: c.Now})
	if err != nil {
		f.Fatal(err)
	}
	n := 0
	f.Fuzz(func(t *testing.T, key, eventID, hname, hvalue string, body []byte, ctype, errText string, field uint8) {
		const sentinel = "Zq9sentinelVALUE"
		if strings.Contains(string(body)+key+eventID+hname+hvalue+errText, "entinel") {
			t.Skip()
		}
		name := redact.SensitiveFieldNames[int(field)%len(redact.SensitiveFieldNames)]
		// The sentinel goes under a sensitive name, beside the fuzzed body, in both shapes.
		jsonBody := fmt.Sprintf(`{"%s":"%s","data":%q}`, name, sentinel, body)
		formBody := name + "=" + sentinel + "&data=" + string(body)
		n++
		a := Attempt{
			ID: fmt.Sprintf("att_fuzz_%d", n), Direction: Outbound, Provider: hvalue, Operation: errText,
			Method: hname, Path: "/v1/x?" + string(body), IdempotencyKey: key, PaymentID: eventID, EventID: eventID,
			ProviderPaymentID: key, Invoice: hvalue, CorrelationID: errText, Source: hvalue,
			RequestHeader:  map[string]string{hname: hvalue, "Content-Type": ctype},
			RequestBody:    string(body),
			ResponseHeader: map[string]string{"Content-Type": "application/json"}, ResponseBody: jsonBody,
			Err: errText, Claimed: []string{key, eventID},
		}
		ctx := context.Background()
		var logs bytes.Buffer
		log := slog.New(redact.LogHandler(slog.NewJSONHandler(&logs, nil)))
		BestEffort(failing{}, log)(ctx, a)
		log.Info(errText, "key", key, "event_id", eventID, hname, hvalue, "body", string(body))
		checkAllStrings(t, "log", logs.Bytes(), sentinel)

		for _, b := range []string{jsonBody, formBody} {
			a.RequestBody = b
			a.RequestHeader["Content-Type"] = map[bool]string{true: "application/json", false: "application/x-www-form-urlencoded"}[b == jsonBody]
			for _, refused := range []bool{false, true} {
				n++
				a.ID, a.Refused = fmt.Sprintf("att_fuzz_%d", n), refused
				if err := l.Record(ctx, a); err != nil {
					t.Fatalf("record: %v", err)
				}
				got, err := l.Get(ctx, a.ID)
				if err != nil {
					t.Fatal(err)
				}
				doc, _ := json.Marshal(got)
				checkAllStrings(t, "stored", doc, sentinel)
				if refused || b != jsonBody {
					continue // the lookup items are the same summaries: one record's are enough
				}
				for _, by := range Lookups {
					v := map[By]string{ByIdempotencyKey: key, ByPaymentID: eventID, ByEventID: eventID, ByProviderPaymentID: key, ByInvoice: hvalue}[by]
					if v == "" {
						continue
					}
					page, err := l.Lookup(ctx, by, v, "")
					if err != nil {
						continue // an invalid key for the store (empty after redaction, say)
					}
					doc, _ := json.Marshal(page)
					checkAllStrings(t, "lookup", doc, sentinel)
				}
			}
		}
	})
}

type failing struct{}

func (failing) Record(context.Context, Attempt) error {
	return errors.New("store down: 4242424242424242 sk_live_abc")
}

// checkAllStrings decodes every JSON value in data (one per line, or one document) and checks
// every string in it, keys included.
func checkAllStrings(t *testing.T, what string, data []byte, sentinel string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			break
		}
		walkStrings(v, func(s string) {
			redacttest.Check(t, what, s)
			if strings.Contains(s, sentinel) {
				t.Fatalf("%s: the value under a sensitive name survived: %q", what, s)
			}
		})
	}
	if bytes.Contains(data, []byte(sentinel)) {
		t.Fatalf("%s: the sentinel survived in %s", what, data)
	}
}

func walkStrings(v any, fn func(string)) {
	switch v := v.(type) {
	case string:
		fn(v)
	case map[string]any:
		for k, x := range v {
			fn(k)
			walkStrings(x, fn)
		}
	case []any:
		for _, x := range v {
			walkStrings(x, fn)
		}
	}
}
