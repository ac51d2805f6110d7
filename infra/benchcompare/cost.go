package main

import (
	"flag"
	"math"
)

// PriceDate is when the default prices were taken: AWS list prices for us-east-1 as of the
// DynamoDB on-demand reduction of November 2024, the latest this code's authors could check
// (the benchmark machine has no internet). Pass flags for today's.
const PriceDate = "2024-11 (us-east-1 list prices)"

// Prices are USD list prices, on demand, us-east-1.
type Prices struct {
	DynamoWRU     float64 // per million write request units
	DynamoRRU     float64 // per million read request units
	LambdaRequest float64 // per million invocations
	LambdaGBs     float64 // per GB-second, x86_64 (ArmLambdaGBs when the template says arm64)
	SQSRequest    float64 // per million standard-queue requests (64 KiB chunks)
	SFNTransition float64 // per thousand Standard-workflow state transitions
	HTTPAPI       float64 // per million API Gateway HTTP API requests (first 300 million)
}

// ArmLambdaGBs is the arm64 (Graviton) price per GB-second at PriceDate.
const ArmLambdaGBs = 0.0000133334

// DefaultPrices are the list prices at PriceDate.
var DefaultPrices = Prices{
	DynamoWRU:     0.625,
	DynamoRRU:     0.125,
	LambdaRequest: 0.20,
	LambdaGBs:     0.0000166667,
	SQSRequest:    0.40,
	SFNTransition: 0.025,
	HTTPAPI:       1.00,
}

// bindPrices registers one flag per price.
func bindPrices(fs *flag.FlagSet, p *Prices) {
	fs.Float64Var(&p.DynamoWRU, "price-wru", p.DynamoWRU, "USD per million DynamoDB on-demand write request units")
	fs.Float64Var(&p.DynamoRRU, "price-rru", p.DynamoRRU, "USD per million DynamoDB on-demand read request units")
	fs.Float64Var(&p.LambdaRequest, "price-lambda-request", p.LambdaRequest, "USD per million Lambda invocations")
	fs.Float64Var(&p.LambdaGBs, "price-lambda-gbs", p.LambdaGBs, "USD per Lambda GB-second")
	fs.Float64Var(&p.SQSRequest, "price-sqs", p.SQSRequest, "USD per million SQS standard requests")
	fs.Float64Var(&p.SFNTransition, "price-sfn", p.SFNTransition, "USD per thousand Step Functions Standard state transitions")
	fs.Float64Var(&p.HTTPAPI, "price-httpapi", p.HTTPAPI, "USD per million API Gateway HTTP API requests")
}

// Write is Count DynamoDB writes per payment (a rate may be fractional) of an item of a given
// size; Transactional writes cost twice.
type Write struct {
	Bytes         float64
	Transactional bool
	Count         float64
}

// WRU is the write request units of one write: one per started KiB, doubled in a transaction.
func (w Write) WRU() float64 {
	u := math.Max(1, math.Ceil(w.Bytes/1024))
	if w.Transactional {
		u *= 2
	}
	return u
}

// Read is Count DynamoDB reads per payment of an item of a given size.
type Read struct {
	Bytes      float64
	Consistent bool
	Count      float64
}

// RRU is the read request units of one read: one per started 4 KiB, half for an eventually
// consistent read.
func (r Read) RRU() float64 {
	u := math.Max(1, math.Ceil(r.Bytes/4096))
	if !r.Consistent {
		u /= 2
	}
	return u
}

// Usage is what one payment costs, from the measured counts and the deployment's settings.
type Usage struct {
	// DynamoDB work per payment: the idempotency calls measured, plus the effects.
	Writes []Write
	Reads  []Read
	// Lambda invocations per payment and their billed durations.
	Invocations []Invocation
	// SQS requests per payment (send, receive, delete).
	SQSRequests float64
	// Step Functions: the share of payments that start a recovery, attempts per recovery and
	// state transitions per attempt (5 in the recovery machine).
	RecoveryRate, AttemptsPerRecovery, TransitionsPerAttempt float64
	// API Gateway HTTP API requests per payment (the POST and each webhook delivery).
	HTTPRequests float64
}

// Invocation is Count invocations per payment of a function with MemoryMB, each billed for
// DurationMS (Lambda bills per 1 ms).
type Invocation struct {
	Function   string
	Count      float64
	MemoryMB   float64
	DurationMS float64
}

// Cost is USD per million payments, by service.
type Cost struct {
	WRU, RRU               float64 // units per payment
	GBSeconds              float64 // per payment
	Transitions            float64 // per payment
	DynamoDB, Lambda, SQS  float64
	StepFunctions, HTTPAPI float64
	Total                  float64
}

// Model prices a million payments of usage u.
func Model(u Usage, p Prices) Cost {
	var c Cost
	for _, w := range u.Writes {
		c.WRU += w.Count * w.WRU()
	}
	for _, r := range u.Reads {
		c.RRU += r.Count * r.RRU()
	}
	invocations := 0.0
	for _, in := range u.Invocations {
		invocations += in.Count
		c.GBSeconds += in.Count * in.MemoryMB / 1024 * math.Ceil(in.DurationMS) / 1000
	}
	c.Transitions = u.RecoveryRate * u.AttemptsPerRecovery * u.TransitionsPerAttempt
	const million = 1e6
	c.DynamoDB = c.WRU*p.DynamoWRU + c.RRU*p.DynamoRRU
	c.Lambda = invocations*p.LambdaRequest + c.GBSeconds*million*p.LambdaGBs
	c.SQS = u.SQSRequests * p.SQSRequest
	c.StepFunctions = c.Transitions * million / 1000 * p.SFNTransition
	c.HTTPAPI = u.HTTPRequests * p.HTTPAPI
	c.Total = c.DynamoDB + c.Lambda + c.SQS + c.StepFunctions + c.HTTPAPI
	return c
}
