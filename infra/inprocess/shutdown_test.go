package inprocess

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/logs/logstest"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
	"github.com/runtwice/twice/shared/webhooks"
)

// TestCloseDeletesWhatItHandled: the stack closes while its webhook consumers work through a
// backlog (one refund's delivery, queued 800 times: the first applies, the rest are
// duplicates). A consumer deletes the batch it handled even once cancelled, so the queues
// must close after the consumers: a delete refused by a closed queue is work done that comes
// back after a restart.
func TestCloseDeletesWhatItHandled(t *testing.T) {
	logs := &logstest.Buffer{}
	s := newStack(t, Config{Log: slog.New(slog.NewTextHandler(logs, nil))})
	a := call(t, "POST", s.APIURL()+"/payments", "close-1", `{"amount":1200,"currency":"usd","customer":"cus_close","payment_method":"pm_card_visa"}`)
	var v payments.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != http.StatusCreated {
		t.Fatalf("payment: %d %s", a.status, a.body)
	}
	body := fmt.Sprintf(`{"id":"evt_close","object":"event","type":"charge.refunded","created":%d,"data":{"object":{"id":"ch_close","object":"charge","payment_intent":%q,"amount":1200,"amount_refunded":1200,"refunded":true,"metadata":{}}}}`,
		s.clock.Now().Add(time.Hour).Unix(), *v.ProviderPaymentID)
	msg, err := json.Marshal(webhooks.Delivery{Provider: webhooks.ProviderStripe, EventID: "evt_close", Body: []byte(body), ReceivedAt: s.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// Sent from 8 senders, so the consumers are still working through them when Close comes.
	q := s.queues[webhookQueue]
	var senders sync.WaitGroup
	for range 8 {
		senders.Go(func() {
			for range 100 {
				if _, err := q.Send(t.Context(), msg, queue.SendOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	senders.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "queue delete failed") {
			t.Fatalf("a handled message was not deleted: %s", line)
		}
	}
}
