package rie_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	bolt "go.etcd.io/bbolt"

	"github.com/runtwice/twice/infra/asl"
	"github.com/runtwice/twice/infra/costmodel"
	"github.com/runtwice/twice/infra/providersim/stripesim"
	"github.com/runtwice/twice/infra/rie"
	"github.com/runtwice/twice/shared/dynamo"
	"github.com/runtwice/twice/shared/outbox"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/provider"
	"github.com/runtwice/twice/shared/recovery"
	"github.com/runtwice/twice/shared/store"
)

// meter drives flows through the functions under the emulator as AWS would: the outbox
// table's stream hands new messages to outbox-relay, the SQS event source mappings hand queued
// messages to webhook-worker and payment-resolver (their receives and deletes go through a
// recorder too: the event source mapping makes them, and SQS bills them), and Step Functions
// runs each execution the relay starts (infra/asl, the same definition, its Lambda tasks
// invoking recovery-steps under the emulator; its clock runs fast, so a recovery's wait of
// days takes a second).
type meter struct {
	e           *env
	ems         map[string]*rie.Emulator
	invocations map[string]int
	http        int
	transitions int
	esm         *rie.Recorder
	queues      *sqs.Client
	runner      *asl.Runner
	ran         map[string]bool
	relayed     map[string]bool
	emptyPolls  int
	sim         *stripesim.Simulator
}

func newMeter(t *testing.T, e *env, sim *stripesim.Simulator) *meter {
	t.Helper()
	m := &meter{e: e, ems: map[string]*rie.Emulator{}, invocations: map[string]int{}, ran: map[string]bool{},
		relayed: map[string]bool{}, sim: sim}
	for _, fn := range []string{"payments-api", "webhook-ingest", "webhook-worker", "payment-resolver", "outbox-relay",
		"recovery-steps", "reconciler"} {
		m.ems[fn] = e.start(t, fn)
	}
	var err error
	if m.esm, err = rie.NewRecorder(e.fx.Moto); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.esm.Close)
	cfg := e.fx.MotoConfig.Copy()
	cfg.BaseEndpoint = aws.String(m.esm.URL)
	m.queues = sqs.NewFromConfig(cfg)

	db, err := bolt.Open(filepath.Join(t.TempDir(), "sfn.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := asl.NewBoltStore(db)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
		out, err := m.invoke(t, "recovery-steps", input)
		if err != nil {
			return nil, err
		}
		var fail struct{ ErrorType, ErrorMessage string }
		if json.Unmarshal(out, &fail) == nil && fail.ErrorType != "" {
			return nil, &messages.InvokeResponse_Error{Type: fail.ErrorType, Message: fail.ErrorMessage}
		}
		return out, nil
	}
	m.runner = asl.New(st, asl.TaskRegistry{e.fx.Prefix + "-recovery-steps": steps}, asl.WithTimeFactor(1e6))
	t.Cleanup(func() { m.runner.Close() })
	def, err := os.ReadFile(filepath.Join(e.root, "statemachines", "payment-recovery.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	stepsARN := "arn:aws:lambda:" + rie.Region + ":123456789012:function:" + e.fx.Prefix + "-recovery-steps"
	if err := m.runner.Define("payment-recovery", asl.Substitute(def, map[string]string{"RecoveryStepsFunctionArn": stepsARN})); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *meter) invoke(t *testing.T, fn string, payload []byte) ([]byte, error) {
	t.Helper()
	m.invocations[fn]++
	return m.ems[fn].Invoke(t.Context(), payload)
}

func (m *meter) invokeHTTP(t *testing.T, fn string, payload []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	m.http++
	m.invocations[fn]++
	return invokeHTTP(t, m.ems[fn], payload)
}

// usage sums what every recorder saw.
func (m *meter) usage() rie.Usage {
	var u rie.Usage
	for _, recs := range m.e.calls {
		for _, r := range recs {
			u = u.Add(r.Usage())
		}
	}
	return u.Add(m.esm.Usage())
}

func (m *meter) providerRequests(t *testing.T) int64 {
	t.Helper()
	st, err := m.sim.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.Requests
}

// measure runs flow, then everything that follows from it, and returns what it all cost.
func (m *meter) measure(t *testing.T, name string, units int, flow func()) costmodel.Flow {
	t.Helper()
	u0, inv0, http0, tr0, p0, e0 := m.usage(), copyCounts(m.invocations), m.http, m.transitions, m.providerRequests(t), m.emptyPolls
	flow()
	m.drain(t)
	u := m.usage().Sub(u0)
	if empty := m.emptyPolls - e0; empty > 0 {
		u = u.Sub(rie.Usage{Requests: map[string]int{"sqs:ReceiveMessage": empty}})
	}
	c := costmodel.Flow{Name: name, Units: units, Invocations: map[string]int{}, HTTP: m.http - http0, WRU: u.WriteUnits,
		RRU: u.ReadUnits, SQS: u.Service("sqs"), SFNRequests: u.Service("states"), Transitions: m.transitions - tr0,
		Events: u.Events, Stripe: m.providerRequests(t) - p0, Requests: u.Requests, TableWRU: map[string]float64{}}
	for table, n := range u.TableWriteUnits {
		c.TableWRU[strings.TrimPrefix(table, m.e.fx.Prefix+"-")] += n
	}
	for fn, n := range m.invocations {
		if d := n - inv0[fn]; d != 0 {
			c.Invocations[fn] = d
		}
	}
	delete(c.Requests, "ssm:GetParameter") // once per cold start, not per flow
	return c
}

func copyCounts(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// drain delivers what the flow left behind until nothing is: outbox messages to the relay,
// queued messages to their consumers, started executions to the state machine.
func (m *meter) drain(t *testing.T) {
	t.Helper()
	for range 50 {
		if !m.relayNew(t) && !m.consume(t, "webhooks", "webhook-worker") && !m.consume(t, "resolve", "payment-resolver") &&
			!m.runExecutions(t) && !m.fireTimers(t) {
			return
		}
	}
	t.Fatal("the flow did not come to rest after 50 rounds")
}

// relayNew hands the outbox messages not yet handed over to outbox-relay in one stream batch.
func (m *meter) relayNew(t *testing.T) bool {
	t.Helper()
	out, err := dynamo.NewClient(m.e.fx.DynamoDB).Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(m.e.fx.Tables["outbox"])})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range out.Items {
		pk, ok := it["pk"].(*ddbtypes.AttributeValueMemberS)
		if ok && !m.relayed[pk.Value] && !m.waiting(t, pk.Value) {
			ids = append(ids, pk.Value)
			m.relayed[pk.Value] = true
		}
	}
	if len(ids) == 0 {
		return false
	}
	m.invocations["outbox-relay"]++
	m.e.relayOutbox(t, m.ems["outbox-relay"], ids...)
	return true
}

// waiting reports whether the outbox message id is a timer not yet due: the stream leaves it
// (fireTimers stands in for the sweep at its moment).
func (m *meter) waiting(t *testing.T, id string) bool {
	t.Helper()
	it, err := m.e.store().Get(t.Context(), outbox.Table, id, "")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := outbox.Decode(it)
	return err == nil && msg.Waiting(time.Now())
}

// fireTimers brings every parked recovery's timer to its moment once the flow is otherwise at
// rest: it writes each again due now, as the sweep finds it when due, and the relay delivers it
// on the next round.
func (m *meter) fireTimers(t *testing.T) bool {
	t.Helper()
	ctx := t.Context()
	out, err := dynamo.NewClient(m.e.fx.DynamoDB).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(m.e.fx.Tables["outbox"])})
	if err != nil {
		t.Fatal(err)
	}
	fired := false
	for _, item := range out.Items {
		pk, ok := item["pk"].(*ddbtypes.AttributeValueMemberS)
		if !ok {
			continue
		}
		it, err := m.e.store().Get(ctx, outbox.Table, pk.Value, "")
		if err != nil {
			continue // delivered meanwhile
		}
		msg, err := outbox.Decode(it)
		if err != nil || msg.Kind != recovery.KindResume || !msg.Waiting(time.Now()) {
			continue
		}
		w, err := outbox.NewAt(recovery.KindResume, msg.ID, msg.Payload, time.Now(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := m.e.store().Put(ctx, outbox.Table, *w.Put, store.Cond{Kind: store.Always}); err != nil {
			t.Fatal(err)
		}
		fired = true
	}
	return fired
}

// consume is one poll of the queue by its event source mapping: a receive, the consumer's
// invocation with the batch, and a batch delete of what it did not report failed.
func (m *meter) consume(t *testing.T, queue, fn string) bool {
	t.Helper()
	ctx := t.Context()
	url := m.e.fx.QueueURLs[queue]
	out, err := m.queues.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		// The event source mapping's long polls of an empty queue are a fixed cost of the
		// queue (its pollers), not of any flow.
		m.emptyPolls++
		return false
	}
	var ev events.SQSEvent
	for _, msg := range out.Messages {
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range msg.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle),
			Body: aws.ToString(msg.Body), Attributes: msg.Attributes, MessageAttributes: attrs, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:" + rie.Region + ":123456789012:" + m.e.fx.Prefix + "-" + queue, AWSRegion: rie.Region})
	}
	payload, _ := json.Marshal(ev)
	b, err := m.invoke(t, fn, payload)
	var resp events.SQSEventResponse
	if err != nil || json.Unmarshal(b, &resp) != nil || strings.Contains(string(b), "errorType") || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%s on %d messages: %s (%v)", fn, len(ev.Records), b, err)
	}
	var del []sqstypes.DeleteMessageBatchRequestEntry
	for i, msg := range out.Messages {
		del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: msg.ReceiptHandle})
	}
	if _, err := m.queues.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
		t.Fatal(err)
	}
	return true
}

// runExecutions runs every execution the relay started on moto's Step Functions, to its end.
func (m *meter) runExecutions(t *testing.T) bool {
	t.Helper()
	ctx := t.Context()
	api := sfn.NewFromConfig(m.e.fx.MotoConfig)
	list, err := api.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(m.e.fx.StateMachine)})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	for _, x := range list.Executions {
		arn := aws.ToString(x.ExecutionArn)
		if m.ran[arn] {
			continue
		}
		m.ran[arn] = true
		d, err := api.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: x.ExecutionArn})
		if err != nil {
			t.Fatal(err)
		}
		started, err := m.runner.StartExecution(ctx, "payment-recovery", aws.ToString(x.Name), []byte(aws.ToString(d.Input)))
		if err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
		done, err := m.runner.AwaitExecution(wait, started.ExecutionArn)
		cancel()
		if err != nil || done.Status != "SUCCEEDED" {
			t.Fatalf("execution %s: %+v %v", aws.ToString(x.Name), done, err)
		}
		m.transitions += done.StateTransitions
		ran = true
	}
	return ran
}

// simEvents returns the provider's events about a payment intent, oldest first, as its API
// lists them.
func simEvents(t *testing.T, simURL, intent string) [][]byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, simURL+"/v1/events?limit=100", nil)
	req.Header.Set("Authorization", "Bearer "+stripesim.DefaultAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var list struct {
		Data    []json.RawMessage
		HasMore bool `json:"has_more"`
	}
	if err := json.Unmarshal(b, &list); err != nil || list.HasMore {
		t.Fatalf("events: %s (%v)", b, err)
	}
	var out [][]byte
	for i := len(list.Data) - 1; i >= 0; i-- {
		var ev struct {
			Data struct {
				Object struct {
					ID            string `json:"id"`
					PaymentIntent string `json:"payment_intent"`
				}
			}
		}
		_ = json.Unmarshal(list.Data[i], &ev)
		if ev.Data.Object.ID == intent || ev.Data.Object.PaymentIntent == intent {
			out = append(out, list.Data[i])
		}
	}
	return out
}

// newEvents returns the events of all that are not in seen.
func newEvents(all, seen [][]byte) [][]byte {
	var out [][]byte
	for _, ev := range all {
		if !slices.ContainsFunc(seen, func(s []byte) bool { return string(s) == string(ev) }) {
			out = append(out, ev)
		}
	}
	return out
}

// signed is a webhook-ingest event delivering body as Stripe signs it now.
func (e *env) signed(t *testing.T, body []byte) []byte {
	t.Helper()
	return edit(t, e.event(t, "webhook-ingest/stripe.json"), func(ev *events.APIGatewayV2HTTPRequest) {
		ev.Body, ev.IsBase64Encoded = string(body), false
		ts := time.Now().Unix() // the function checks it against the wall clock
		mac := hmac.New(sha256.New, []byte(stripeWebhookSecret))
		fmt.Fprintf(mac, "%d.%s", ts, body)
		ev.Headers["stripe-signature"] = fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))
	})
}

func TestCostPerFlow(t *testing.T) {
	e := setup(t)
	m := newMeter(t, e, e.simulator)
	ctx := t.Context()
	post := e.event(t, "payments-api/post-payment.json")
	pay := func(key, pm string) []byte {
		return edit(t, post, func(ev *events.APIGatewayV2HTTPRequest) {
			ev.Headers["idempotency-key"] = key
			ev.Body = `{"amount":2000,"currency":"usd","customer":"cus_acme","payment_method":"` + pm + `","invoice":"in_` + key + `"}`
			ev.IsBase64Encoded = false
		})
	}
	intentOf := func(body string) string {
		t.Helper()
		var v struct{ ID string }
		_ = json.Unmarshal([]byte(body), &v)
		p, err := payments.Get(ctx, e.store(), v.ID)
		if err != nil || p.ProviderPaymentID == "" {
			t.Fatalf("payment %s: %+v %v", v.ID, p, err)
		}
		return p.ProviderPaymentID
	}
	backfill := func(listed *int) func() {
		return func() {
			b, err := m.invoke(t, "reconciler", e.event(t, "reconciler/backfill.json"))
			var rep struct{ Listed int }
			if err != nil || strings.Contains(string(b), "errorType") || json.Unmarshal(b, &rep) != nil {
				t.Fatalf("backfill: %s %v", b, err)
			}
			*listed = rep.Listed
		}
	}
	// The backfill over an empty event log: what every pass pays.
	var none int
	flows := []costmodel.Flow{m.measure(t, costmodel.FlowBackfillEmpty, 0, backfill(&none))}
	if none != 0 {
		t.Fatalf("the backfill listed %d events of an empty log", none)
	}
	created := pay("order-cost-1", "pm_card_visa")
	var first events.APIGatewayV2HTTPResponse
	flows = append(flows, m.measure(t, costmodel.FlowNew+" (succeeded)", 0, func() {
		if first = m.invokeHTTP(t, "payments-api", created); first.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", first.StatusCode, first.Body)
		}
	}))
	flows = append(flows, m.measure(t, costmodel.FlowReplay, 0, func() {
		if r := m.invokeHTTP(t, "payments-api", created); r.Body != first.Body || r.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("replay: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
	}))
	deliver := func(evs [][]byte) func() {
		return func() {
			for _, ev := range evs {
				if r := m.invokeHTTP(t, "webhook-ingest", e.signed(t, ev)); r.StatusCode != http.StatusOK {
					t.Fatalf("webhook: %d %s", r.StatusCode, r.Body)
				}
			}
		}
	}
	evs := simEvents(t, e.sim.URL, intentOf(first.Body))
	flows = append(flows, m.measure(t, fmt.Sprintf("%s (%s)", costmodel.FlowWebhooksPaid, plural(len(evs), "event")), len(evs), deliver(evs)))

	// A full refund of that payment, and the provider's events about it.
	paid := evs
	var refunded events.APIGatewayV2HTTPResponse
	flows = append(flows, m.measure(t, costmodel.FlowRefund+" (full)", 0, func() {
		refunded = m.invokeHTTP(t, "payments-api", edit(t, created, func(ev *events.APIGatewayV2HTTPRequest) {
			var v struct{ ID string }
			_ = json.Unmarshal([]byte(first.Body), &v)
			path := "/payments/" + v.ID + "/refunds"
			ev.RouteKey, ev.RequestContext.RouteKey = "POST /payments/{id}/refunds", "POST /payments/{id}/refunds"
			ev.RawPath, ev.RequestContext.HTTP.Path, ev.PathParameters = path, path, map[string]string{"id": v.ID}
			ev.Headers["idempotency-key"], ev.Body = "refund-cost-1", "{}"
		}))
		if refunded.StatusCode != http.StatusCreated {
			t.Fatalf("refund: %d %s", refunded.StatusCode, refunded.Body)
		}
	}))
	evs = newEvents(simEvents(t, e.sim.URL, intentOf(first.Body)), paid)
	flows = append(flows, m.measure(t, fmt.Sprintf("%s (%s)", costmodel.FlowWebhooksRefund, plural(len(evs), "event")), len(evs), deliver(evs)))

	// A soft decline: the card declines once for insufficient funds, and the recovery's
	// charge at the planned moment succeeds.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.sim.URL+"/_sim/cards",
		strings.NewReader(`{"payment_method":"pm_cost_soft","decline_code":"insufficient_funds","times":1}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("card rule: %v %v", resp, err)
	}
	var declined events.APIGatewayV2HTTPResponse
	flows = append(flows, m.measure(t, costmodel.FlowDecline, 0, func() {
		if declined = m.invokeHTTP(t, "payments-api", pay("order-cost-2", "pm_cost_soft")); declined.StatusCode != http.StatusPaymentRequired {
			t.Fatalf("decline: %d %s", declined.StatusCode, declined.Body)
		}
	}))
	if p, err := payments.Get(ctx, e.store(), payments.PaymentID("jwt:client-acme", "order-cost-2")); err != nil || p.Status != provider.StatusSucceeded {
		t.Fatalf("after its recovery round the payment is %+v (%v), want succeeded", p, err)
	}
	evs = simEvents(t, e.sim.URL, intentOf(declined.Body))
	flows = append(flows, m.measure(t, fmt.Sprintf("%s (%s)", costmodel.FlowWebhooksDecline, plural(len(evs), "event")), len(evs), deliver(evs)))

	// Reconciliation: a pass over a window with no payment (what every pass pays), and one
	// over the window holding both; the difference is what each payment adds to a pass. The
	// backfill likewise: a pass over every event so far, against the first, empty, one.
	now := time.Now().UTC().Truncate(time.Second)
	reconcile := func(from, to time.Time, want int) func() {
		return func() {
			b, err := m.invoke(t, "reconciler", fmt.Appendf(nil, `{"from":%q,"to":%q}`, from.Format(time.RFC3339), to.Format(time.RFC3339)))
			var rep struct {
				ComparedLocal int `json:"compared_local"`
				Differences   []string
			}
			if err != nil || json.Unmarshal(b, &rep) != nil || rep.ComparedLocal != want || len(rep.Differences) != 0 {
				t.Fatalf("reconcile: %s %v; want %d payments compared and no difference", b, err, want)
			}
		}
	}
	flows = append(flows, m.measure(t, costmodel.FlowReconEmpty, 0, reconcile(now.Add(-50*time.Hour), now.Add(-26*time.Hour), 0)))
	flows = append(flows, m.measure(t, costmodel.FlowRecon+" (2 payments)", 2, reconcile(now.Add(-time.Hour), now, 2)))
	var listed int
	f := m.measure(t, costmodel.FlowBackfill, 0, backfill(&listed))
	f.Name, f.Units = fmt.Sprintf("%s (%s)", costmodel.FlowBackfill, plural(listed, "event")), listed
	flows = append(flows, f)
	if listed == 0 {
		t.Fatal("the backfill listed no event")
	}
	checkCostTable(t, e.root, flows)
}

// The cost section's markers in docs/performance.md.
const (
	costBegin = "<!-- cost table: generated by TestCostPerFlow in infra/rie/cost_test.go; TWICE_UPDATE_COST=1 rewrites it -->\n"
	costEnd   = "<!-- end of the generated cost table -->\n"
)

// checkCostTable fails unless docs/performance.md's cost table and docs/cost-flows.json are what
// these flows measure; with TWICE_UPDATE_COST=1 it rewrites them instead.
func checkCostTable(t *testing.T, root string, flows []costmodel.Flow) {
	t.Helper()
	tmpl, err := os.Open(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer tmpl.Close()
	mb, arm, err := costmodel.TemplateLambda(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := costmodel.Render(&table, flows, costmodel.DefaultMix, costmodel.DefaultAssumptions.PageObjects, costmodel.ListPrices,
		costmodel.Lambda{MemoryMB: mb, Arm64: arm, OwnMS: 30, ProviderMS: 300, TemplateNote: "template.yaml's Globals"}); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(flows, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	js = append(js, '\n')

	benchPath := filepath.Join(root, "docs", "performance.md")
	bench, err := os.ReadFile(benchPath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(bench), costBegin)
	_, after, ok2 := strings.Cut(rest, costEnd)
	if !ok1 || !ok2 {
		t.Fatalf("docs/performance.md has no cost table between %q and %q", costBegin, costEnd)
	}
	wantBench := before + costBegin + table.String() + costEnd + after
	jsonPath := filepath.Join(root, "docs", "cost-flows.json")
	oldJSON, _ := os.ReadFile(jsonPath)
	if os.Getenv("TWICE_UPDATE_COST") == "1" {
		if err := os.WriteFile(benchPath, []byte(wantBench), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(jsonPath, js, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote docs/performance.md's cost table and docs/cost-flows.json:\n%s", table.String())
		return
	}
	if string(bench) != wantBench || !sameFlows(oldJSON, flows) {
		t.Errorf("the measured flows differ from docs/performance.md's cost table or docs/cost-flows.json; if the change is meant, "+
			"rerun with TWICE_UPDATE_COST=1 and commit both. Measured:\n%s\n%s", js, table.String())
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sameFlows reports whether the stored docs/cost-flows.json holds these flows, their requests
// by action aside: how many index Queries a reconciliation pass makes depends on how many UTC
// days its windows span, so on the hour; what they cost and every priced figure does not.
func sameFlows(stored []byte, flows []costmodel.Flow) bool {
	var old []costmodel.Flow
	if json.Unmarshal(stored, &old) != nil || len(old) != len(flows) {
		return false
	}
	for i := range flows {
		a, b := old[i], flows[i]
		a.Requests, b.Requests = nil, nil
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		if string(x) != string(y) {
			return false
		}
	}
	return true
}
