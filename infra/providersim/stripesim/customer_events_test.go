package stripesim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCustomerEvents: POST /_sim/customers/{id}/events sends each steering event signed like
// every other, with the object Stripe would carry; bad requests are 400 problems.
func TestCustomerEvents(t *testing.T) {
	h := newHarness(t)
	post := func(customer, body string) *http.Response {
		t.Helper()
		resp, err := http.Post(h.srv.URL+"/_sim/customers/"+customer+"/events", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for name, tc := range map[string]struct {
		customer, body string
		want           int
	}{
		"attached":         {"cus_1", `{"type":"payment_method.attached","payment_method":"pm_card_visa"}`, 200},
		"updated":          {"cus_1", `{"type":"payment_method.automatically_updated","payment_method":"pm_card_mastercard"}`, 200},
		"new default":      {"cus_1", `{"type":"customer.updated","payment_method":"pm_card_visa","previous":"pm_old"}`, 200},
		"invoice paid":     {"cus_1", `{"type":"invoice.paid","invoice":"in_1"}`, 200},
		"unknown type":     {"cus_1", `{"type":"charge.disputed"}`, 400},
		"not a customer":   {"acct_1", `{"type":"invoice.paid","invoice":"in_1"}`, 400},
		"no method":        {"cus_1", `{"type":"payment_method.attached"}`, 400},
		"no invoice":       {"cus_1", `{"type":"invoice.paid"}`, 400},
		"unknown field":    {"cus_1", `{"type":"invoice.paid","invoice":"in_1","x":1}`, 400},
		"a huge method id": {"cus_1", `{"type":"payment_method.attached","payment_method":"pm_` + strings.Repeat("a", 300) + `"}`, 400},
	} {
		t.Run(name, func(t *testing.T) {
			if resp := post(tc.customer, tc.body); resp.StatusCode != tc.want {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if n, err := h.sim.Deliver(t.Context()); err != nil || n != 4 {
		t.Fatalf("delivered %d, %v; want the 4 events", n, err)
	}
	types := map[string]json.RawMessage{}
	prev := map[string]map[string]any{}
	for _, ev := range h.hooks.got() {
		types[string(ev.Type)] = ev.Data.Raw
		prev[string(ev.Type)] = ev.Data.PreviousAttributes
	}
	for _, want := range []string{"payment_method.attached", "payment_method.automatically_updated", "customer.updated", "invoice.paid"} {
		if _, ok := types[want]; !ok {
			t.Fatalf("no %s delivered; got %v", want, h.hooks.got())
		}
	}
	var pm struct {
		Customer string `json:"customer"`
		Card     struct {
			Fingerprint string `json:"fingerprint"`
		} `json:"card"`
	}
	if err := json.Unmarshal(types["payment_method.attached"], &pm); err != nil || pm.Customer != "cus_1" ||
		pm.Card.Fingerprint != cardFingerprint("pm_card_visa", "") {
		t.Fatalf("payment_method.attached data %s: %v", types["payment_method.attached"], err)
	}
	if p, _ := prev["customer.updated"]["invoice_settings"].(map[string]any); p["default_payment_method"] != "pm_old" ||
		!strings.Contains(string(types["customer.updated"]), `"default_payment_method":"pm_card_visa"`) {
		t.Fatalf("customer.updated data %s, previous %v", types["customer.updated"], prev["customer.updated"])
	}
}
