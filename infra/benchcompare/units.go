package main

import "math"

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
