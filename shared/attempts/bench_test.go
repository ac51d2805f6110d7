package attempts

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runtwice/twice/shared/redact"
)

// stripeForm is a typical PaymentIntent create body as stripe-go sends it: about 2 KiB,
// form-encoded, with raw card data (the worst case: most integrations send a pm_ id).
func stripeForm() string {
	var b strings.Builder
	b.WriteString("amount=1999&currency=usd&customer=cus_NffrFeUfNV2Hib&confirm=true&capture_method=automatic")
	b.WriteString("&payment_method_data[type]=card&payment_method_data[card][number]=4242424242424242")
	b.WriteString("&payment_method_data[card][exp_month]=12&payment_method_data[card][exp_year]=2034&payment_method_data[card][cvc]=314")
	b.WriteString("&payment_method_data[billing_details][name]=Jenny+Rosen&payment_method_data[billing_details][email]=jenny%40example.com")
	b.WriteString("&description=Invoice+INV-0042+for+March&statement_descriptor_suffix=TWICE&expand[]=latest_charge")
	for i := 0; b.Len() < 2048-40; i++ {
		fmt.Fprintf(&b, "&metadata[order_line_%02d]=sku_%06d+qty+%d", i, i*7919, i%5+1)
	}
	return b.String()
}

// stripeJSON is a typical PaymentIntent response: about 2 KiB of JSON with a client secret.
func stripeJSON() string {
	var b strings.Builder
	b.WriteString(`{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","object":"payment_intent","amount":1999,"amount_capturable":0,`)
	b.WriteString(`"amount_received":1999,"capture_method":"automatic","client_secret":"pi_3MtwBwLkdIwHu7ix28a3tqPa_secret_YrKJUKribcBjcG8HVhfZluoGH",`)
	b.WriteString(`"confirmation_method":"automatic","created":1680800504,"currency":"usd","customer":"cus_NffrFeUfNV2Hib",`)
	b.WriteString(`"latest_charge":{"id":"ch_3MtwBwLkdIwHu7ix28a3tqPa","object":"charge","amount":1999,"paid":true,"status":"succeeded",`)
	b.WriteString(`"payment_method_details":{"type":"card","card":{"brand":"visa","last4":"4242","exp_month":12,"exp_year":2034,"funding":"credit",`)
	b.WriteString(`"checks":{"address_line1_check":null,"address_postal_code_check":null,"cvc_check":"pass"},"network":"visa"}},`)
	b.WriteString(`"outcome":{"network_status":"approved_by_network","reason":null,"risk_level":"normal","risk_score":32,"seller_message":"Payment complete.","type":"authorized"}},`)
	b.WriteString(`"livemode":false,"payment_method":"pm_1MtwBwLkdIwHu7ixWfGqvoLs","payment_method_types":["card"],"status":"succeeded","metadata":{`)
	for i := 0; b.Len() < 2048-40; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"order_line_%02d":"sku_%06d qty %d"`, i, i*7919, i%5+1)
	}
	b.WriteString(`}}`)
	return b.String()
}

func BenchmarkRedactCap(b *testing.B) {
	bodies := map[string]struct{ contentType, body string }{
		"form_2KiB": {"application/x-www-form-urlencoded", stripeForm()},
		"json_2KiB": {"application/json", stripeJSON()},
	}
	for name, c := range bodies {
		b.Run(name, func(b *testing.B) {
			body := []byte(c.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				out, _ := redact.Cap(redact.Body(c.contentType, body), DefaultBodyCap)
				if strings.Contains(out, "4242424242424242") || strings.Contains(out, "YrKJ") {
					b.Fatal("not redacted")
				}
			}
		})
	}
}

// BenchmarkRecord measures Log.Record on the embedded store with 16 concurrent writers, each
// recording an outbound call with both 2 KiB bodies (four items per attempt, one transaction).
func BenchmarkRecord(b *testing.B) {
	s := openStore(b)
	l, err := NewLog(Log{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	form, js := stripeForm(), stripeJSON()
	var n atomic.Int64
	b.SetParallelism(max(1, 16/runtimeProcs()))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			err := l.Record(ctx, Attempt{
				Direction: Outbound, Provider: "stripe", Operation: "payment_intents.create",
				Method: "POST", Path: "/v1/payment_intents",
				RequestHeader:  map[string]string{"Authorization": "Bearer sk_test_abc", "Content-Type": "application/x-www-form-urlencoded"},
				RequestBody:    form,
				ResponseHeader: map[string]string{"Content-Type": "application/json", "Request-Id": "req_1"},
				ResponseBody:   js, Status: 200, Result: ResultOK,
				IdempotencyKey: fmt.Sprintf("k%d", i), PaymentID: fmt.Sprintf("pay_%d", i%1000), EventID: "",
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
