// Package costmodel prices twice's flows from their measured calls. infra/rie's
// TestCostPerFlow runs each flow on the AWS form (the functions under aws-lambda-rie, DynamoDB
// Local, moto, Step Functions definitions run by infra/asl) and counts what it cost; this
// package turns those counts into the cost table in docs/performance.md, with dated list prices and
// a stated mix of flows per payment.
package costmodel

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Flow is what one flow cost, from its trigger until nothing was left to do.
type Flow struct {
	Name string `json:"flow"`
	// Invocations counts Lambda invocations by function.
	Invocations map[string]int `json:"lambda_invocations"`
	HTTP        int            `json:"http_api_requests"`
	WRU         float64        `json:"dynamodb_wru"`
	RRU         float64        `json:"dynamodb_rru"`
	SQS         int            `json:"sqs_requests"`
	Transitions int            `json:"sfn_transitions"`
	SFNRequests int            `json:"sfn_requests"`
	Events      int            `json:"eventbridge_events"`
	Stripe      int64          `json:"stripe_requests"`
	// Requests are the AWS requests by action, and TableWRU the write units by table (the
	// template's logical names), for reading what a figure is made of.
	Requests map[string]int     `json:"aws_requests"`
	TableWRU map[string]float64 `json:"dynamodb_wru_by_table"`
	// Units is how many of the thing the flow's name counts it covered (events walked,
	// payments in a reconciliation window); 0 when it is one of its kind.
	Units int `json:"units,omitempty"`
}

// LambdaInvocations sums Invocations.
func (f Flow) LambdaInvocations() int {
	n := 0
	for _, v := range f.Invocations {
		n += v
	}
	return n
}

// Prices are USD list prices, on demand, us-east-1.
type Prices struct {
	Date          string  // when the prices were taken
	DynamoWRU     float64 // per million write request units
	DynamoRRU     float64 // per million read request units
	LambdaRequest float64 // per million invocations
	LambdaGBs     float64 // per GB-second, arm64
	LambdaGBsX86  float64 // per GB-second, x86_64
	SQSRequest    float64 // per million standard-queue requests
	SFNTransition float64 // per thousand Standard-workflow state transitions
	HTTPAPI       float64 // per million HTTP API requests (first 300 million a month)
	Events        float64 // per million EventBridge custom events put
}

// ListPrices are AWS's us-east-1 on-demand list prices as of November 2024 (after that month's
// DynamoDB on-demand reduction): the latest this code's authors could check, on a machine
// without internet. Check today's before relying on a total.
var ListPrices = Prices{
	Date:          "2024-11",
	DynamoWRU:     0.625,
	DynamoRRU:     0.125,
	LambdaRequest: 0.20,
	LambdaGBs:     0.0000133334,
	LambdaGBsX86:  0.0000166667,
	SQSRequest:    0.40,
	SFNTransition: 0.025,
	HTTPAPI:       1.00,
	Events:        1.00,
}

// Lambda is how a deployment runs its functions and what an invocation is billed for. Lambda
// bills wall time, and under the emulator that is noise, so the duration is modelled: a fixed
// part for the function's own work and a part for each provider request it waits on.
type Lambda struct {
	MemoryMB     float64
	Arm64        bool
	OwnMS        float64 // billed per invocation for the function's own work
	ProviderMS   float64 // billed per Stripe request the flow made
	TemplateNote string  // where MemoryMB and Arm64 were read
}

// Mix is what a payment is made of: how often each flow happens per payment.
type Mix struct {
	DeclineRate float64 // share of payments declined first and recovered by one round
	ReplayRate  float64 // client retries per payment that replay
	// RefundRate is the share of payments refunded in full, once.
	RefundRate float64
	// ReconPasses is how many reconciliation passes see each payment: each schedule's window
	// over its period (template.yaml: 2 h every hour, and 25 h every day).
	ReconPasses float64
	// BackfillListings is how many backfill passes list each event: one, and one more for
	// an event in the overlap a pass re-lists before its checkpoint (5 minutes of every 15).
	BackfillListings float64
}

// DefaultMix is the mix docs/performance.md prices.
var DefaultMix = Mix{DeclineRate: 0.05, ReplayRate: 0.1, RefundRate: 0.05, ReconPasses: 2 + 25.0/24, BackfillListings: 4.0 / 3}

// Cost is USD per million of something, by service.
type Cost struct {
	DynamoDB, Lambda, SQS, StepFunctions, HTTPAPI, EventBridge float64
}

// Total sums the services.
func (c Cost) Total() float64 {
	return c.DynamoDB + c.Lambda + c.SQS + c.StepFunctions + c.HTTPAPI + c.EventBridge
}

func (c Cost) plus(d Cost, k float64) Cost {
	return Cost{c.DynamoDB + k*d.DynamoDB, c.Lambda + k*d.Lambda, c.SQS + k*d.SQS, c.StepFunctions + k*d.StepFunctions,
		c.HTTPAPI + k*d.HTTPAPI, c.EventBridge + k*d.EventBridge}
}

// GBSeconds is the flow's billed Lambda duration.
func (l Lambda) GBSeconds(f Flow) float64 {
	ms := float64(f.LambdaInvocations())*l.OwnMS + float64(f.Stripe)*l.ProviderMS
	return l.MemoryMB / 1024 * ms / 1000
}

func (l Lambda) gbs(p Prices) float64 {
	if l.Arm64 {
		return p.LambdaGBs
	}
	return p.LambdaGBsX86
}

// Price is a million runs of f.
func Price(f Flow, p Prices, l Lambda) Cost {
	return Cost{
		DynamoDB:      f.WRU*p.DynamoWRU + f.RRU*p.DynamoRRU,
		Lambda:        float64(f.LambdaInvocations())*p.LambdaRequest + l.GBSeconds(f)*1e6*l.gbs(p),
		SQS:           float64(f.SQS) * p.SQSRequest,
		StepFunctions: float64(f.Transitions) * 1000 * p.SFNTransition,
		HTTPAPI:       float64(f.HTTP) * p.HTTPAPI,
		EventBridge:   float64(f.Events) * p.Events,
	}
}

// The flows a payment is priced from, by name prefix (TestCostPerFlow names them).
const (
	FlowNew             = "new payment"
	FlowReplay          = "replay"
	FlowWebhooksPaid    = "webhooks of a succeeded payment"
	FlowDecline         = "decline and one recovery round"
	FlowWebhooksDecline = "webhooks of a declined then recovered payment"
	FlowRefund          = "refund"
	FlowWebhooksRefund  = "webhooks of a refund"
	FlowReconEmpty      = "reconciliation pass, empty window"
	FlowRecon           = "reconciliation pass, payments in the window"
	FlowBackfillEmpty   = "backfill pass, nothing new"
	FlowBackfill        = "backfill pass, new events"
)

// Line is one part of a payment: a flow, how often it happens per payment, and why.
type Line struct {
	Flow  string
	Times float64
	Why   string
	Cost  Cost // per million payments
	// TableWRU is the DynamoDB write units per payment, by table.
	TableWRU map[string]float64
}

// part is one part of a payment: a flow, how often per payment, and why; with without set,
// the part is the difference between a pass with its flow's units and one without, per unit.
type part struct {
	flow    Flow
	without *Flow
	times   float64
	why     string
}

// share is how many times a payment runs the part: times for a flow of its own; for a pass
// (measured with its objects and again without), its extra page is shared by the objects a
// list page holds at scale, pageObjects, or by the objects measured if they were more.
func (p part) share(pageObjects float64) float64 {
	if p.without == nil {
		return p.times
	}
	if p.flow.Units == 0 {
		return 0
	}
	return p.times / max(pageObjects, float64(p.flow.Units))
}

// parts is what a payment of mix is made of: each successful payment's flow and webhooks, the
// declined share's, the replays, the refunds, and each payment's share of the reconciliation
// passes and the backfill walk.
func parts(flows []Flow, mix Mix) ([]part, error) {
	get := func(name string) (Flow, error) {
		i := slices.IndexFunc(flows, func(f Flow) bool { return strings.HasPrefix(f.Name, name) })
		if i < 0 {
			return Flow{}, fmt.Errorf("costmodel: no flow %q measured", name)
		}
		return flows[i], nil
	}
	var errs []error
	must := func(name string) Flow {
		f, err := get(name)
		errs = append(errs, err)
		return f
	}
	newPay, replay, hooks := must(FlowNew), must(FlowReplay), must(FlowWebhooksPaid)
	decline, declineHooks := must(FlowDecline), must(FlowWebhooksDecline)
	refund, refundHooks := must(FlowRefund), must(FlowWebhooksRefund)
	reconEmpty, recon := must(FlowReconEmpty), must(FlowRecon)
	bfEmpty, bf := must(FlowBackfillEmpty), must(FlowBackfill)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	hooksPerPaid := float64(max(hooks.Units, 1))
	hooksPerDeclined := float64(max(declineHooks.Units, 1))
	eventsPerPayment := (1-mix.DeclineRate)*hooksPerPaid + mix.DeclineRate*hooksPerDeclined +
		mix.RefundRate*float64(max(refundHooks.Units, 1))
	return []part{
		{newPay, nil, 1 - mix.DeclineRate, "payments that succeed at once"},
		{hooks, nil, 1 - mix.DeclineRate, "their webhooks"},
		{decline, nil, mix.DeclineRate, "payments declined, then recovered"},
		{declineHooks, nil, mix.DeclineRate, "their webhooks"},
		{replay, nil, mix.ReplayRate, "client retries"},
		{refund, nil, mix.RefundRate, "payments refunded"},
		{refundHooks, nil, mix.RefundRate, "their webhooks"},
		{recon, &reconEmpty, mix.ReconPasses, "each payment's part of every pass whose window holds it"},
		{bf, &bfEmpty, eventsPerPayment * mix.BackfillListings, "each event's part of the backfill passes that list it"},
	}, nil
}

// PerPayment prices a million payments of mix from the flows: each successful payment's flow
// and webhooks, the declined share's, the replays, and each payment's share of the
// reconciliation passes and the backfill walk (measured as the difference between a pass with
// the payments and one without, shared by the objects of a list page: part.share). Fixed costs
// (the passes that run whatever the traffic) are left out.
func PerPayment(flows []Flow, mix Mix, pageObjects float64, p Prices, l Lambda) ([]Line, error) {
	ps, err := parts(flows, mix)
	if err != nil {
		return nil, err
	}
	lines := make([]Line, 0, len(ps))
	for _, pt := range ps {
		ln := Line{Flow: pt.flow.Name, Times: pt.times, Why: pt.why, TableWRU: map[string]float64{}}
		if pt.without == nil {
			ln.Cost = Price(pt.flow, p, l).scaled(pt.times)
			for t, n := range pt.flow.TableWRU {
				ln.TableWRU[t] = n * pt.times
			}
		} else if k := pt.share(pageObjects); k != 0 {
			ln.Cost = Price(pt.flow, p, l).plus(Price(*pt.without, p, l), -1).scaled(k)
			for t, n := range pt.flow.TableWRU {
				ln.TableWRU[t] += n * k
			}
			for t, n := range pt.without.TableWRU {
				ln.TableWRU[t] -= n * k
			}
		}
		lines = append(lines, ln)
	}
	return lines, nil
}

func (c Cost) scaled(k float64) Cost { return Cost{}.plus(c, k) }

// Render is the cost section of docs/performance.md: the flows as measured, then a million
// payments of mix.
func Render(w io.Writer, flows []Flow, mix Mix, pageObjects float64, p Prices, l Lambda) error {
	lines, err := PerPayment(flows, mix, pageObjects, p, l)
	if err != nil {
		return err
	}
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	pf("Each flow as measured on the AWS form, from its trigger until nothing is left to do:\n\n")
	pf("| flow | Lambda invocations | HTTP API | DynamoDB WRU | RRU | SQS | Step Functions transitions | EventBridge events | Stripe requests | USD per million |\n")
	pf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range flows {
		pf("| %s | %s | %d | %s | %s | %d | %d | %d | %d | %.2f |\n", f.Name, invocations(f), f.HTTP, num(f.WRU), num(f.RRU), f.SQS,
			f.Transitions, f.Events, f.Stripe, Price(f, p, l).Total())
	}
	arch := "x86_64"
	if l.Arm64 {
		arch = "arm64"
	}
	gbs := l.gbs(p)
	pf("\nPrices: AWS us-east-1 on-demand list prices as of %s: $%g / $%g per million DynamoDB write / read units,\n", p.Date, p.DynamoWRU, p.DynamoRRU)
	pf("$%g per million Lambda invocations and $%s per GB-s (%s), $%g per million SQS requests, $%g per thousand\n", p.LambdaRequest, strconv.FormatFloat(gbs, 'f', -1, 64), arch, p.SQSRequest, p.SFNTransition)
	pf("Step Functions transitions, $%g per million HTTP API requests, $%g per million EventBridge events. Lambda\n", p.HTTPAPI, p.Events)
	pf("runs at %.0f MB (%s), billed %.0f ms per invocation plus %.0f ms per Stripe request the flow waits on.\n",
		l.MemoryMB, l.TemplateNote, l.OwnMS, l.ProviderMS)
	pf("\nA million payments, %.0f%% declined first and recovered by one round, %.0f%% refunded in full, %.1f replays\n", mix.DeclineRate*100, mix.RefundRate*100, mix.ReplayRate)
	pf("per payment, ")
	pf("each seen by %s reconciliation passes, each event listed by %.2f backfill passes, list pages of %.0f objects:\n\n",
		num(mix.ReconPasses), mix.BackfillListings, pageObjects)
	pf("| part | per payment | why | DynamoDB | Lambda | SQS | Step Functions | HTTP API | EventBridge | USD per million payments |\n")
	pf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	var total Cost
	for _, ln := range lines {
		c := ln.Cost
		total = total.plus(c, 1)
		pf("| %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", ln.Flow, num(ln.Times), ln.Why, c.DynamoDB, c.Lambda, c.SQS,
			c.StepFunctions, c.HTTPAPI, c.EventBridge, c.Total())
	}
	pf("| **total** | | | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** |\n", total.DynamoDB, total.Lambda, total.SQS,
		total.StepFunctions, total.HTTPAPI, total.EventBridge, total.Total())

	largest := slices.MaxFunc(lines, func(a, b Line) int { return cmp.Compare(a.Cost.Total(), b.Cost.Total()) })
	pf("\nThe largest part is \"%s\": %.0f%% of the total. ", largest.Flow, 100*largest.Cost.Total()/total.Total())
	byTable := map[string]float64{}
	sum := 0.0
	for _, ln := range lines {
		for t, n := range ln.TableWRU {
			byTable[t] += n
			sum += n
		}
	}
	tables := make([]string, 0, len(byTable))
	for t := range byTable {
		tables = append(tables, t)
	}
	slices.SortFunc(tables, func(a, b string) int { return cmp.Compare(byTable[b], byTable[a]) })
	pf("DynamoDB write units per payment, %.1f in all, by table:", sum)
	for i, t := range tables {
		sep := ","
		if i == 0 {
			sep = ""
		}
		pf("%s %s %.1f (%.0f%%)", sep, t, byTable[t], 100*byTable[t]/sum)
	}
	pf(".\n")
	return nil
}

func invocations(f Flow) string {
	names := make([]string, 0, len(f.Invocations))
	for fn := range f.Invocations {
		names = append(names, fn)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, fn := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", fn, f.Invocations[fn])
	}
	return b.String()
}

// num prints a count without a fraction when it has none.
func num(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// ErrNoMemorySize means the template declares no MemorySize.
var ErrNoMemorySize = errors.New("costmodel: template sets no MemorySize")

// TemplateLambda reads the first MemorySize of a SAM template (the Globals one, which the
// functions priced here inherit) and whether its functions run on arm64.
func TemplateLambda(r io.Reader) (memoryMB float64, arm64 bool, err error) {
	sc := bufio.NewScanner(r)
	found := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "MemorySize:"); ok && !found {
			if memoryMB, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				return 0, false, err
			}
			found = true
		}
		if strings.HasPrefix(line, "Architectures:") && strings.Contains(line, "arm64") {
			arm64 = true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, false, err
	}
	if !found {
		return 0, arm64, ErrNoMemorySize
	}
	return memoryMB, arm64, nil
}
