package webhooks

import (
	"errors"
	"net/http"
	"os"
	"reflect"
	"testing"
	"time"
)

func mustRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeStripe(t *testing.T) {
	tests := map[string]struct {
		file string
		want Event
	}{
		"payment_intent.succeeded": {file: "pi_succeeded.json", want: Event{
			Provider: ProviderStripe, ID: "evt_3PaSucc", Type: "payment_intent.succeeded",
			ObjectType: "payment_intent", ObjectID: "pi_123", ObjectVersion: 1767225600*16 + 5,
			Created: time.Unix(1767225600, 0).UTC(),
			PaymentIntent: &PaymentIntent{ID: "pi_123", Status: "succeeded", Amount: 2000, Currency: "usd",
				Customer: "cus_9", Metadata: map[string]string{"order": "o-1"}},
		}},
		"payment_intent.payment_failed, expanded customer": {file: "pi_failed.json", want: Event{
			Provider: ProviderStripe, ID: "evt_3PaFail", Type: "payment_intent.payment_failed",
			ObjectType: "payment_intent", ObjectID: "pi_123", ObjectVersion: 1767225600*16 + 4,
			Created: time.Unix(1767225600, 0).UTC(),
			PaymentIntent: &PaymentIntent{ID: "pi_123", Status: "requires_payment_method", Amount: 2000, Currency: "usd",
				Customer: "cus_9", Metadata: map[string]string{},
				LastPaymentError: &PaymentError{Type: "card_error", Code: "card_declined", DeclineCode: "insufficient_funds",
					AdviceCode: "try_again_later", NetworkAdviceCode: "02", NetworkDeclineCode: "51"}},
		}},
		"charge.refunded orders on its payment intent": {file: "charge_refunded.json", want: Event{
			Provider: ProviderStripe, ID: "evt_3ChRef", Type: "charge.refunded",
			ObjectType: "payment_intent", ObjectID: "pi_123", ObjectVersion: 1767225660*16 + 6,
			Created: time.Unix(1767225660, 0).UTC(),
			Charge:  &Charge{ID: "ch_777", PaymentIntentID: "pi_123", Amount: 2000, AmountRefunded: 2000, Refunded: true},
			PaymentIntent: &PaymentIntent{ID: "pi_123", Amount: 2000, Currency: "usd", Customer: "cus_9",
				Metadata: map[string]string{"order": "o-1"}, LatestCharge: "ch_777"},
		}},
		"other type, generic": {file: "customer_created.json", want: Event{
			Provider: ProviderStripe, ID: "evt_Cus", Type: "customer.created",
			ObjectType: "customer", ObjectID: "cus_9", ObjectVersion: 1767225600 * 16,
			Created: time.Unix(1767225600, 0).UTC(),
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			body := mustRead(t, tc.file)
			got, err := Decode(Delivery{Provider: ProviderStripe, Body: body})
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Raw) != string(body) {
				t.Fatal("Raw is not the body byte for byte")
			}
			got.Raw = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestStripeVersionOrdersALifecycle(t *testing.T) {
	// Events of one payment within one second and across seconds, in the order they happen.
	seq := []struct {
		created int64
		typ     string
	}{
		{100, "payment_intent.created"},
		{100, "payment_intent.requires_action"},
		{100, "payment_intent.processing"},
		{100, "payment_intent.payment_failed"},
		{101, "payment_intent.processing"},
		{101, "payment_intent.succeeded"},
		{101, "charge.refunded"},
	}
	for i := 1; i < len(seq); i++ {
		a, b := StripeVersion(seq[i-1].created, seq[i-1].typ), StripeVersion(seq[i].created, seq[i].typ)
		if a >= b {
			t.Fatalf("%v (%d) does not order before %v (%d)", seq[i-1], a, seq[i], b)
		}
	}
}

func TestDecodeStandard(t *testing.T) {
	body := mustRead(t, "standard.json")
	ts := time.Date(2026, 1, 1, 0, 0, 0, 5e8, time.UTC)
	tests := map[string]struct {
		id   string
		body string
		want Event
		err  error
	}{
		"object id and version from data": {id: "msg_1", body: string(body), want: Event{
			Provider: ProviderStandard, ID: "msg_1", Type: "invoice.paid", ObjectType: "invoice",
			ObjectID: "inv_42", ObjectVersion: 7, Created: ts}},
		"no data id, no version": {id: "msg_2", body: `{"type":"ping","timestamp":"2026-01-01T00:00:00.5Z","data":{"id":5}}`, want: Event{
			Provider: ProviderStandard, ID: "msg_2", Type: "ping", ObjectID: "msg_2", ObjectVersion: ts.UnixMilli(), Created: ts}},
		"data not an object": {id: "msg_3", body: `{"type":"ping","timestamp":"2026-01-01T00:00:00.5Z","data":[1]}`, want: Event{
			Provider: ProviderStandard, ID: "msg_3", Type: "ping", ObjectID: "msg_3", ObjectVersion: ts.UnixMilli(), Created: ts}},
		"no id":          {body: string(body), err: ErrBadPayload},
		"no type":        {id: "m", body: `{"timestamp":"2026-01-01T00:00:00Z","data":{}}`, err: ErrBadPayload},
		"bad timestamp":  {id: "m", body: `{"type":"a","timestamp":"yesterday","data":{}}`, err: ErrBadPayload},
		"not json":       {id: "m", body: `<xml/>`, err: ErrBadPayload},
		"version string": {id: "m", body: `{"type":"a","timestamp":"2026-01-01T00:00:00Z","data":{"version":"7"}}`, err: ErrBadPayload},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(Delivery{Provider: ProviderStandard, Headers: map[string]string{StandardIDHeader: tc.id}, Body: []byte(tc.body)})
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			got.Raw = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDecodeStripeRejects(t *testing.T) {
	tests := map[string]string{
		"not json":          `nope`,
		"no id":             `{"type":"a","created":1,"data":{"object":{"id":"x"}}}`,
		"no created":        `{"id":"evt","type":"a","data":{"object":{"id":"x"}}}`,
		"no data":           `{"id":"evt","type":"a","created":1}`,
		"object no id":      `{"id":"evt","type":"a","created":1,"data":{"object":{"object":"thing"}}}`,
		"not an event":      `{"id":"pi_1","object":"payment_intent","type":"a","created":1,"data":{"object":{"id":"x"}}}`,
		"amount a string":   `{"id":"evt","type":"payment_intent.succeeded","created":1,"data":{"object":{"id":"pi","object":"payment_intent","amount":"10"}}}`,
		"created too large": `{"id":"evt","type":"a","created":9223372036854775807,"data":{"object":{"id":"x"}}}`,
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeStripe([]byte(body)); !errors.Is(err, ErrBadPayload) {
				t.Fatalf("err = %v, want ErrBadPayload", err)
			}
		})
	}
	if _, err := Decode(Delivery{Provider: "paypal"}); !errors.Is(err, ErrUnknownProvider) {
		t.Fatalf("unknown provider: %v", err)
	}
}

func TestDedupeKeys(t *testing.T) {
	a := Event{Provider: "stripe", ID: "evt_1", ObjectID: "pi_1", Type: "payment_intent.succeeded", ObjectVersion: 21}
	b := a
	b.ID = "evt_2" // a second Event object for the same change
	if EventKey(a) == EventKey(b) {
		t.Fatal("different event ids share an EventKey")
	}
	if ChangeKey(a) != ChangeKey(b) {
		t.Fatalf("one change, two keys: %q %q", ChangeKey(a), ChangeKey(b))
	}
	if got, want := ChangeKey(a), "stripe/pi_1/payment_intent.succeeded/21"; got != want {
		t.Fatalf("ChangeKey = %q, want %q", got, want)
	}
	// Separators inside ids cannot make two tuples collide.
	x := Event{Provider: "standard", ObjectID: "a/b", Type: "c", ObjectVersion: 1}
	y := Event{Provider: "standard", ObjectID: "a", Type: "b/c", ObjectVersion: 1}
	if ChangeKey(x) == ChangeKey(y) {
		t.Fatalf("collision: %q", ChangeKey(x))
	}
}

func TestNewDelivery(t *testing.T) {
	h := http.Header{}
	h.Set(StandardIDHeader, "msg_1")
	h.Set(StandardTimestampHeader, "1767225600")
	h.Set(StandardSignatureHeader, "v1,secret-ish")
	h.Set(StripeSignatureHeader, "t=1,v1=00")
	at := time.Unix(5, 0)
	tests := map[string]struct {
		provider string
		body     string
		want     Delivery
	}{
		"stripe id from body":    {ProviderStripe, `{"id":"evt_9"}`, Delivery{Provider: ProviderStripe, EventID: "evt_9", Body: []byte(`{"id":"evt_9"}`), ReceivedAt: at}},
		"stripe body without id": {ProviderStripe, `[]`, Delivery{Provider: ProviderStripe, Body: []byte(`[]`), ReceivedAt: at}},
		"standard id from header": {ProviderStandard, `{}`, Delivery{Provider: ProviderStandard, EventID: "msg_1", Body: []byte(`{}`), ReceivedAt: at,
			Headers: map[string]string{StandardIDHeader: "msg_1", StandardTimestampHeader: "1767225600"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := NewDelivery(tc.provider, h, []byte(tc.body), at)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, name := range []string{"pi_succeeded.json", "pi_failed.json", "charge_refunded.json", "customer_created.json"} {
		f.Add(ProviderStripe, "", mustRead(f, name))
	}
	f.Add(ProviderStandard, "msg_1", mustRead(f, "standard.json"))
	f.Add(ProviderStandard, "m", []byte(`{"type":"a","timestamp":"2026-01-01T00:00:00Z","data":{"id":{"x":1},"version":-1}}`))
	f.Add(ProviderStripe, "", []byte(`{"id":"e","type":"charge.refunded","created":1,"data":{"object":{"id":"ch","object":"charge","payment_intent":{"id":"pi"}}}}`))
	for _, body := range steerBodies {
		f.Add(ProviderStripe, "", []byte(body))
	}
	f.Add(ProviderStripe, "", []byte(`{"id":"e","type":"charge.dispute.created","created":2,"data":{"object":{"id":"dp_1","object":"dispute","payment_intent":"pi_1","status":"needs_response","evidence_details":{"due_by":99}}}}`))
	f.Fuzz(func(t *testing.T, provider, id string, body []byte) {
		ev, err := Decode(Delivery{Provider: provider, Headers: map[string]string{StandardIDHeader: id}, Body: body})
		if err != nil {
			if !errors.Is(err, ErrBadPayload) && !errors.Is(err, ErrUnknownProvider) {
				t.Fatalf("error %v is not a sentinel", err)
			}
			return
		}
		if ev.ID == "" || ev.Type == "" || ev.ObjectID == "" || ev.Provider != provider {
			t.Fatalf("decoded an incomplete event: %+v", ev)
		}
		if ev.Provider == ProviderStripe && ev.ObjectVersion != StripeVersion(ev.Created.Unix(), ev.Type) {
			t.Fatalf("version %d does not derive from created and type", ev.ObjectVersion)
		}
		if st := ev.Steer; st != nil && (len(st.Customer) > maxRef || len(st.PaymentMethod) > maxRef || len(st.Invoice) > maxRef) {
			t.Fatalf("an uncapped steering field: %+v", st)
		}
	})
}

// steerBodies are the customer-side events, as the simulator sends them.
var steerBodies = map[string]string{
	"attached": `{"id":"evt_1","object":"event","type":"payment_method.attached","created":1700000000,"data":{"object":{"id":"pm_new","object":"payment_method","customer":"cus_1","card":{"brand":"visa","fingerprint":"F1"}}}}`,
	"updated":  `{"id":"evt_2","object":"event","type":"payment_method.automatically_updated","created":1700000000,"data":{"object":{"id":"pm_old","object":"payment_method","customer":{"id":"cus_1","object":"customer"}}}}`,
	"default":  `{"id":"evt_3","object":"event","type":"customer.updated","created":1700000000,"data":{"object":{"id":"cus_1","object":"customer","invoice_settings":{"default_payment_method":"pm_new"}},"previous_attributes":{"invoice_settings":{"default_payment_method":"pm_old"}}}}`,
	"email":    `{"id":"evt_4","object":"event","type":"customer.updated","created":1700000000,"data":{"object":{"id":"cus_1","object":"customer","email":"a@b","invoice_settings":{"default_payment_method":"pm_old"}},"previous_attributes":{"email":"old@b"}}}`,
	"paid":     `{"id":"evt_5","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1","object":"invoice","customer":"cus_1","paid_out_of_band":true}}}`,
	"wrong":    `{"id":"evt_6","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"pm_x","object":"payment_method"}}}`,
}

func TestDecodeSteeringEvents(t *testing.T) {
	tests := map[string]struct {
		want    *Steer
		invalid bool
	}{
		"attached": {want: &Steer{Customer: "cus_1", PaymentMethod: "pm_new"}},
		"updated":  {want: &Steer{Customer: "cus_1", PaymentMethod: "pm_old"}},
		"default":  {want: &Steer{Customer: "cus_1", PaymentMethod: "pm_new"}},
		"email":    {}, // a customer.updated that changes no default steers nothing
		"paid":     {want: &Steer{Customer: "cus_1", Invoice: "in_1"}},
		"wrong":    {invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ev, err := DecodeStripe([]byte(steerBodies[name]))
			if tc.invalid {
				if !errors.Is(err, ErrBadPayload) {
					t.Fatalf("err %v, want ErrBadPayload", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (ev.Steer == nil) != (tc.want == nil) || (ev.Steer != nil && *ev.Steer != *tc.want) {
				t.Fatalf("steer %+v, want %+v", ev.Steer, tc.want)
			}
		})
	}
}
