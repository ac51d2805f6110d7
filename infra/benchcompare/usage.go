package main

import (
	"bufio"
	"errors"
	"flag"
	"io"
	"strconv"
	"strings"
)

// callUnits turns measured calls per request into DynamoDB request units, for items of
// itemBytes; a TransactWriteItems call writes txItems items, each at twice the price. A failed
// conditional write is billed like a successful one.
func callUnits(calls map[string]float64, itemBytes float64, txItems int) (wru, rru float64) {
	for op, n := range calls {
		switch op {
		case "PutItem", "UpdateItem", "DeleteItem":
			wru += n * Write{Bytes: itemBytes}.WRU()
		case "TransactWriteItems":
			wru += n * float64(txItems) * Write{Bytes: itemBytes, Transactional: true}.WRU()
		case "GetItem":
			rru += n * Read{Bytes: itemBytes, Consistent: true}.RRU()
		}
	}
	return wru, rru
}

// Assumptions are the inputs of the cost model that this run does not measure, with defaults
// read from the code at this commit; each is a flag.
type Assumptions struct {
	MemoryMB          float64 // Lambda memory; from template.yaml when it sets MemorySize
	ProviderMS        float64 // the provider API call inside a payment, which loopback cannot show
	PaymentBytes      float64 // a stored payment item
	SmallBytes        float64 // alias and webhook dedupe items
	ReplayRate        float64 // client retries per payment that replay
	WebhooksPerPay    float64 // provider events applied per payment
	SQSBatch          float64 // messages per worker invocation
	RecoveryRate      float64 // share of payments that start a recovery
	AttemptsPerRecov  float64
	TransitionsPerAtt float64 // the recovery machine's transitions per attempt
	LambdasPerAttempt float64 // recovery-steps invocations per attempt
}

// DefaultAssumptions reflect shared/payments, shared/webhooks/worker and
// statemachines/payment-recovery.asl.json at this commit.
var DefaultAssumptions = Assumptions{
	MemoryMB:          128,
	ProviderMS:        400,
	PaymentBytes:      700,
	SmallBytes:        200,
	ReplayRate:        0.1,
	WebhooksPerPay:    1,
	SQSBatch:          1,
	RecoveryRate:      0.05,
	AttemptsPerRecov:  2,
	TransitionsPerAtt: 5,
	LambdasPerAttempt: 2,
}

func bindAssumptions(fs *flag.FlagSet, a *Assumptions) {
	fs.Float64Var(&a.MemoryMB, "memory-mb", a.MemoryMB, "Lambda memory in MB when template.yaml sets no MemorySize")
	fs.Float64Var(&a.ProviderMS, "provider-ms", a.ProviderMS, "assumed provider API latency added to each payment's Lambda duration")
	fs.Float64Var(&a.PaymentBytes, "payment-bytes", a.PaymentBytes, "size of a stored payment item")
	fs.Float64Var(&a.SmallBytes, "small-bytes", a.SmallBytes, "size of an alias or webhook dedupe item")
	fs.Float64Var(&a.ReplayRate, "replay-rate", a.ReplayRate, "replayed client retries per payment")
	fs.Float64Var(&a.WebhooksPerPay, "webhooks", a.WebhooksPerPay, "provider webhook events applied per payment")
	fs.Float64Var(&a.SQSBatch, "sqs-batch", a.SQSBatch, "webhook messages per worker invocation")
	fs.Float64Var(&a.RecoveryRate, "recovery-rate", a.RecoveryRate, "share of payments that start a Step Functions recovery")
	fs.Float64Var(&a.AttemptsPerRecov, "attempts", a.AttemptsPerRecov, "charge attempts per recovery")
	fs.Float64Var(&a.TransitionsPerAtt, "transitions", a.TransitionsPerAtt, "state transitions per recovery attempt")
	fs.Float64Var(&a.LambdasPerAttempt, "recovery-lambdas", a.LambdasPerAttempt, "recovery-steps invocations per attempt")
}

// Measured are the figures this run produced that the cost model uses.
type Measured struct {
	NewCalls, ReplayCalls map[string]float64 // twice's DynamoDB calls per request
	RecordBytes           float64            // twice's completed idempotency record
	PaymentMS, ReplayMS   float64            // local stack p50s: new payment, replay
	WebhookMS             float64            // local stack p50 of a webhook delivery
}

// twiceUsage builds one payment's usage: the payments-api path (measured idempotency calls,
// the transaction also writing the payment and its alias), replays, webhook events (one read of
// the payment, one transaction of event and change dedupe items, payment and alias), SQS,
// recovery and API Gateway.
func twiceUsage(m Measured, a Assumptions) Usage {
	var u Usage
	addCalls := func(calls map[string]float64, scale float64, tx []float64) {
		for op, n := range calls {
			n *= scale
			switch op {
			case "PutItem", "UpdateItem", "DeleteItem":
				u.Writes = append(u.Writes, Write{Bytes: m.RecordBytes, Count: n})
			case "TransactWriteItems":
				for _, b := range tx {
					u.Writes = append(u.Writes, Write{Bytes: b, Transactional: true, Count: n})
				}
			case "GetItem":
				u.Reads = append(u.Reads, Read{Bytes: m.RecordBytes, Consistent: true, Count: n})
			}
		}
	}
	addCalls(m.NewCalls, 1, []float64{m.RecordBytes, a.PaymentBytes, a.SmallBytes})
	addCalls(m.ReplayCalls, a.ReplayRate, nil)
	u.Reads = append(u.Reads, Read{Bytes: a.PaymentBytes, Consistent: true, Count: a.WebhooksPerPay})
	for _, b := range []float64{a.SmallBytes, a.SmallBytes, a.PaymentBytes, a.SmallBytes} {
		u.Writes = append(u.Writes, Write{Bytes: b, Transactional: true, Count: a.WebhooksPerPay})
	}
	batch := max(a.SQSBatch, 1)
	u.Invocations = []Invocation{
		{Function: "payments-api", Count: 1, MemoryMB: a.MemoryMB, DurationMS: m.PaymentMS + a.ProviderMS},
		{Function: "payments-api (replay)", Count: a.ReplayRate, MemoryMB: a.MemoryMB, DurationMS: m.ReplayMS},
		{Function: "webhook-ingest", Count: a.WebhooksPerPay, MemoryMB: a.MemoryMB, DurationMS: m.WebhookMS},
		{Function: "webhook-worker", Count: a.WebhooksPerPay / batch, MemoryMB: a.MemoryMB, DurationMS: m.WebhookMS * batch},
		{Function: "recovery-steps", Count: a.RecoveryRate * a.AttemptsPerRecov * a.LambdasPerAttempt, MemoryMB: a.MemoryMB, DurationMS: a.ProviderMS},
	}
	// Send per message; receive and delete per batch.
	u.SQSRequests = a.WebhooksPerPay + 2*a.WebhooksPerPay/batch
	u.RecoveryRate, u.AttemptsPerRecovery, u.TransitionsPerAttempt = a.RecoveryRate, a.AttemptsPerRecov, a.TransitionsPerAtt
	u.HTTPRequests = 1 + a.ReplayRate + a.WebhooksPerPay
	return u
}

// errNoMemorySize means template.yaml declares no MemorySize.
var errNoMemorySize = errors.New("benchcompare: template.yaml sets no MemorySize")

// templateLambda returns the first MemorySize in a SAM template (the Globals one, which the
// functions priced here inherit) and whether its functions run on arm64.
func templateLambda(r io.Reader) (memoryMB float64, arm64 bool, err error) {
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
		return 0, arm64, errNoMemorySize
	}
	return memoryMB, arm64, nil
}
