package costmodel

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Assumptions are what the capacity model takes beyond the measured flows and their mix.
type Assumptions struct {
	Mix Mix
	// PageObjects is how many objects a provider list page holds at scale: the reconciliation
	// and backfill flows were measured with one short page, whose cost is the page's, so at
	// scale each object carries 1/PageObjects of it (the attempt log caps a stored body at
	// 8 KiB, so a full page costs about what a short one does).
	PageObjects float64
	// RecoveryDays is how long a recovery lasts, on average, from its decline to its end.
	RecoveryDays float64
	// StepSeconds is how long an execution stays open when it ends at each wait: one step
	// (classify, plan, charge) and its Lambda invocations.
	StepSeconds float64
	// SecretReadsPerEnv is how many parameters each Lambda execution environment reads per
	// SecretRefreshSeconds (shared/secrets caches each for 5 minutes).
	SecretReadsPerEnv, SecretRefreshSeconds float64
	// Billing is how long an invocation runs: OwnMS each, plus ProviderMS per Stripe request
	// it waits on (the cost table's figures).
	Billing Lambda
}

// DefaultAssumptions are docs/capacity.md's.
var DefaultAssumptions = Assumptions{Mix: DefaultMix, PageObjects: 100, RecoveryDays: 3, StepSeconds: 2,
	SecretReadsPerEnv: 1, SecretRefreshSeconds: 300, Billing: Lambda{OwnMS: 30, ProviderMS: 300}}

// Rates are the rates used in docs/capacity.md, in payments a second.
var Rates = []float64{100, 1000, 10000}

// Calls is what one payment of the mix makes each service do, on average.
type Calls struct {
	Invocations     map[string]float64 // by function
	ConcurrencySecs float64            // Lambda execution seconds
	HTTP, SQS       float64
	TableWRU        map[string]float64
	RRU             float64
	StartExecutions float64
	Transitions     float64
	PutEvents       float64
	StripeWrites    float64 // creates, confirms, captures, refunds
	StripeReads     float64 // list pages of reconciliation and backfill
}

// Lambdas sums Invocations.
func (c Calls) Lambdas() float64 {
	n := 0.0
	for _, v := range c.Invocations {
		n += v
	}
	return n
}

func (c *Calls) add(f Flow, k float64, read bool, b Lambda) {
	for fn, n := range f.Invocations {
		c.Invocations[fn] += float64(n) * k
	}
	c.ConcurrencySecs += k * (float64(f.LambdaInvocations())*b.OwnMS + float64(f.Stripe)*b.ProviderMS) / 1000
	c.HTTP += float64(f.HTTP) * k
	c.SQS += float64(f.SQS) * k
	for t, n := range f.TableWRU {
		c.TableWRU[t] += n * k
	}
	c.RRU += f.RRU * k
	c.StartExecutions += float64(f.Requests["states:StartExecution"]) * k
	c.Transitions += float64(f.Transitions) * k
	c.PutEvents += float64(f.Requests["events:PutEvents"]) * k
	if read {
		c.StripeReads += float64(f.Stripe) * k
	} else {
		c.StripeWrites += float64(f.Stripe) * k
	}
}

// PerPaymentCalls is what one payment of a.Mix makes each service do: the same parts as
// PerPayment prices, with the reconciliation and backfill passes' extra page shared by
// a.PageObjects objects.
func PerPaymentCalls(flows []Flow, a Assumptions) (Calls, error) {
	ps, err := parts(flows, a.Mix)
	if err != nil {
		return Calls{}, err
	}
	c := Calls{Invocations: map[string]float64{}, TableWRU: map[string]float64{}}
	for _, p := range ps {
		if p.without == nil {
			c.add(p.flow, p.times, false, a.Billing)
			continue
		}
		k := p.share(a.PageObjects)
		if k == 0 {
			continue
		}
		c.add(p.flow, k, true, a.Billing)
		c.add(*p.without, -k, true, a.Billing)
	}
	return c, nil
}

// Quota is one default AWS (or Stripe) quota a rate is set against.
type Quota struct {
	What    string                               // the rate, as the table names it
	Unit    string                               // its unit
	PerPay  func(c Calls, a Assumptions) float64 // per payment a second (for a count: per payment)
	Limit   float64                              // the default, 0 when there is no quota on it
	Default string                               // the default as the page states it
	Source  string                               // the quota page
	Change  string                               // what an operator changes when it is reached
}

// Quota pages.
const (
	srcAPIGW     = "https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html"
	srcLambda    = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
	srcScaling   = "https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html"
	srcDynamo    = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
	srcSQS       = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html"
	srcSFN       = "https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html"
	srcEvents    = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html"
	srcSSM       = "https://docs.aws.amazon.com/general/latest/gr/ssm.html"
	srcStripe    = "https://docs.stripe.com/rate-limits"
	srcScheduler = "https://docs.aws.amazon.com/scheduler/latest/UserGuide/scheduler-quotas.html"
)

// Quotas lists the rates the model sets against a default quota, one row each; the tables'
// write units come first, one row per table the flows write.
func Quotas(c Calls) []Quota {
	var qs []Quota
	tables := make([]string, 0, len(c.TableWRU))
	for t := range c.TableWRU {
		tables = append(tables, t)
	}
	slices.SortFunc(tables, func(x, y string) int { return cmp.Compare(c.TableWRU[y], c.TableWRU[x]) })
	qs = append(qs,
		Quota{What: "API Gateway HTTP API requests", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.HTTP },
			Limit: 10000, Default: "10,000 rps per account and Region (burst 5,000)", Source: srcAPIGW, Change: "quota increase"},
		Quota{What: "Lambda invocations", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.Lambdas() },
			Limit: 10000, Default: "10 x concurrency: 10,000/s per function (here all functions together)", Source: srcLambda, Change: "rises with the concurrency quota"},
		Quota{What: "Lambda concurrency", Unit: "", PerPay: func(c Calls, _ Assumptions) float64 { return c.ConcurrencySecs },
			Limit: 1000, Default: "1,000 per account and Region; each function adds at most 1,000 every 10 s", Source: srcLambda + ", " + srcScaling,
			Change: "quota increase (to tens of thousands)"},
	)
	for _, t := range tables {
		if c.TableWRU[t] <= 0 {
			continue // a table only the passes write, whatever the traffic
		}
		qs = append(qs, Quota{What: "DynamoDB write units, table " + t, Unit: "/s",
			PerPay: func(c Calls, _ Assumptions) float64 { return c.TableWRU[t] },
			Limit:  40000, Default: "40,000 per on-demand table (a new table starts at 4,000)", Source: srcDynamo,
			Change: "table quota increase; warm throughput before launch"})
	}
	qs = append(qs,
		Quota{What: "DynamoDB read units, all tables", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.RRU },
			Limit: 40000, Default: "40,000 per on-demand table (here all tables' reads together)", Source: srcDynamo, Change: "table quota increase"},
		Quota{What: "SQS requests", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.SQS },
			Default: "no rate quota on standard queues (120,000 in flight per queue)", Source: srcSQS, Change: "none"},
		Quota{What: "Step Functions StartExecution", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.StartExecutions },
			Limit: 300, Default: "refill 300/s, bucket 1,300 (us-east-1, us-west-2, eu-west-1; 150/s and 800 elsewhere)", Source: srcSFN,
			Change: "quota increase; or fewer executions per recovery"},
		Quota{What: "Step Functions state transitions", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.Transitions },
			Limit: 5000, Default: "refill 5,000/s, bucket 5,000 (us-east-1, us-west-2, eu-west-1; 800 elsewhere; lower on new accounts)",
			Source: srcSFN, Change: "quota increase"},
		Quota{What: "EventBridge PutEvents", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.PutEvents },
			Limit: 10000, Default: "10,000/s in us-east-1 (2,400 in us-east-2, less in smaller Regions)", Source: srcEvents,
			Change: "quota increase; or batch up to 10 entries a call"},
		Quota{What: "SSM GetParameter", Unit: "/s", PerPay: func(c Calls, a Assumptions) float64 {
			return c.ConcurrencySecs * a.SecretReadsPerEnv / a.SecretRefreshSeconds
		}, Limit: 40, Default: "40/s standard throughput, 10,000/s with higher throughput", Source: srcSSM,
			Change: "turn on higher throughput (billed per call)"},
		Quota{What: "Stripe write requests", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.StripeWrites },
			Limit: 100, Default: "100/s live mode, 25/s test mode", Source: srcStripe,
			Change: "ask Stripe for an increase (6 weeks ahead for a large one)"},
		Quota{What: "Stripe read requests", Unit: "/s", PerPay: func(c Calls, _ Assumptions) float64 { return c.StripeReads },
			Limit: 100, Default: "100/s live mode, 25/s test mode", Source: srcStripe,
			Change: "ask Stripe for an increase; or list less often"},
	)
	return qs
}

// OpenExecutions is how many recovery executions are open at rate under each design: held
// open through every wait (a Standard execution waiting on a task token), and ended at each
// wait (open only while a step runs, restarted by a timer in the outbox), with the timers
// that design keeps instead.
func OpenExecutions(c Calls, a Assumptions, rate float64) (heldOpen, endAtWait, timers float64) {
	recoveries := rate * a.Mix.DeclineRate // started a second
	heldOpen = recoveries * a.RecoveryDays * 86400
	endAtWait = rate * c.StartExecutions * a.StepSeconds
	return heldOpen, endAtWait, heldOpen
}

// MaxOpenExecutions is Step Functions' default quota on open Standard executions.
const MaxOpenExecutions = 1_000_000

// RenderCapacity writes docs/capacity.md's generated part: the mix, the table of rates
// against quotas, the first limit at each rate and the open executions.
func RenderCapacity(w io.Writer, flows []Flow, a Assumptions) error {
	c, err := PerPaymentCalls(flows, a)
	if err != nil {
		return err
	}
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	m := a.Mix
	pf("Per payment: %s declined first and recovered by one round, %s refunded in full, %s replays,\n",
		pct(m.DeclineRate), pct(m.RefundRate), num(m.ReplayRate))
	pf("each seen by %s reconciliation passes and each event listed by %s backfill passes, list pages of\n", num(m.ReconPasses), num(m.BackfillListings))
	pf("%s objects; Lambda runs %.0f ms an invocation plus %.0f ms per Stripe request it waits on.\n\n", num(a.PageObjects), a.Billing.OwnMS, a.Billing.ProviderMS)
	pf("| rate | per payment | 100 payments/s | 1,000 payments/s | 10,000 payments/s | default quota | what changes |\n")
	pf("|---|---:|---:|---:|---:|---|---|\n")
	qs := Quotas(c)
	type hit struct {
		q   Quota
		use float64
	}
	first := make([][]hit, len(Rates))
	for _, q := range qs {
		per := q.PerPay(c, a)
		cells := make([]string, len(Rates))
		for i, r := range Rates {
			v := per * r
			cells[i] = count(v)
			if q.Limit > 0 {
				use := v / q.Limit
				if use > 1 {
					cells[i] = "**" + cells[i] + "**"
				}
				first[i] = append(first[i], hit{q, use})
			}
		}
		pf("| %s%s | %s | %s | [%s](%s) | %s |\n", q.What, q.Unit, round(per), strings.Join(cells, " | "), q.Default,
			strings.SplitN(q.Source, ", ", 2)[0], q.Change)
	}
	pf("\nBold: over the default. What each rate reaches, most used first:\n\n")
	for i, r := range Rates {
		hs := first[i]
		slices.SortFunc(hs, func(x, y hit) int { return cmp.Compare(y.use, x.use) })
		var over []string
		aws := -1
		for j, h := range hs {
			if h.use > 1 {
				over = append(over, fmt.Sprintf("%s (%.1fx)", h.q.What, h.use))
			}
			if aws < 0 && !strings.HasPrefix(h.q.What, "Stripe") {
				aws = j
			}
		}
		pf("- **%s payments/s**: ", count(r))
		if len(over) == 0 {
			pf("no default reached")
		} else {
			pf("over the default: %s", strings.Join(over, ", "))
		}
		if h := hs[aws]; h.use > 1 {
			pf(". First AWS quota: %s; %s", h.q.What, h.q.Change)
		} else {
			pf(". No AWS rate quota reached; the nearest is %s at %.0f%%", h.q.What, 100*h.use)
		}
		if held, _, _ := OpenExecutions(c, a, r); held > MaxOpenExecutions {
			pf(". Recoveries held open through their waits would exceed the open executions quota (%.1fx, below)", held/MaxOpenExecutions)
		}
		pf(".\n")
	}
	return nil
}

// RenderOpenExecutions writes docs/capacity.md's open-executions table: how many recovery
// executions are open at each rate when they are held through their waits, and when they end
// at each wait.
func RenderOpenExecutions(w io.Writer, flows []Flow, a Assumptions) error {
	c, err := PerPaymentCalls(flows, a)
	if err != nil {
		return err
	}
	pf := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	m := a.Mix
	pf("Recoveries last %s days on average; an execution that ends at each wait is open %s s per step.\n\n", num(a.RecoveryDays), num(a.StepSeconds))
	pf("| payments/s | recoveries started/s | open executions, held through the waits | open executions, ended at each wait | timers waiting in the outbox |\n")
	pf("|---:|---:|---:|---:|---:|\n")
	for _, r := range Rates {
		held, ended, timers := OpenExecutions(c, a, r)
		h := count(held)
		if held > MaxOpenExecutions {
			h = fmt.Sprintf("**%s** (%.1fx)", h, held/MaxOpenExecutions)
		}
		pf("| %s | %s | %s | %s | %s |\n", count(r), count(r*m.DeclineRate), h, count(ended), count(timers))
	}
	held := MaxOpenExecutions / (m.DeclineRate * a.RecoveryDays * 86400)
	pf("\nHeld through their waits, open executions reach the quota of %s at %s payments/s sustained.\n",
		count(MaxOpenExecutions), count(held))
	return nil
}

func pct(v float64) string { return num(v*100) + "%" }

// round prints a per-payment figure with up to three significant decimals.
func round(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 0.1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.4f", v)
}

// count prints a rate or a count with thousands separators, no fraction past 10.
func count(v float64) string {
	if math.Abs(v) < 10 && v != math.Trunc(v) {
		return fmt.Sprintf("%.1f", v)
	}
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
