package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/runtwice/twice/shared/store"
)

// CallError is a DynamoDB call that failed for a reason other than a condition. Its message
// names the operation, the logical table and DynamoDB's error code and message, and never the
// request id or endpoint; Unwrap reaches both the store sentinel (ErrInvalid, ErrConflict) and
// the SDK's error, so a caller can log the request id on purpose.
type CallError struct {
	Op    string // DynamoDB operation, e.g. "PutItem"
	Table string // logical table; empty for TransactWriteItems
	Code  string // DynamoDB error code, e.g. "ValidationException"; empty for transport errors
	Msg   string

	kind  error // a store sentinel, or nil
	cause error
}

func (e *CallError) Error() string {
	prefix := "dynamo: " + e.Op
	if e.Table != "" {
		prefix += " " + e.Table
	}
	if e.kind != nil {
		prefix = e.kind.Error() + ": " + prefix
	}
	if e.Code != "" {
		return prefix + ": " + e.Code + ": " + e.Msg
	}
	return prefix + ": " + e.Msg
}

// Unwrap returns the store sentinel (if any) and the SDK error.
func (e *CallError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.cause}
	}
	return []error{e.kind, e.cause}
}

// callError maps an SDK error to the store's errors: a failed condition becomes a
// *store.ConditionError holding the item DynamoDB returned with it (ALL_OLD).
func callError(op, table string, err error) error {
	return callErrorOf(op, table, err, func(int) *layout { return defaultAttrs })
}

// callError is callError with the layout of the logical table.
func (s *Store) callError(op, table string, err error) error {
	a := s.attrsOf(table)
	return callErrorOf(op, table, err, func(int) *layout { return a })
}

// callErrorOf maps an SDK error, decoding an old item with the layout of its write's table.
func callErrorOf(op, table string, err error, attrs func(write int) *layout) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return conditionError(0, ccf.Item, attrs(0))
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		// Reasons line up with the writes; "None" marks the ones that were fine. A failed
		// condition is a fact about the data and wins; a malformed write (item too large, key
		// of the wrong shape) will fail again, so it wins over a conflict, which is transient.
		conflict, invalid, throttled := false, false, false
		for i, r := range tce.CancellationReasons {
			switch stringOf(r.Code) {
			case "ConditionalCheckFailed":
				return conditionError(i, r.Item, attrs(i))
			case "ValidationError":
				invalid = true
			case "TransactionConflict":
				conflict = true
			case "ProvisionedThroughputExceeded", "ThrottlingError":
				throttled = true
			}
		}
		switch {
		case invalid:
			return newCallError(op, table, store.ErrInvalid, err)
		case conflict:
			return newCallError(op, table, store.ErrConflict, err)
		case throttled:
			return newCallError(op, table, store.ErrThrottled, err)
		}
		return newCallError(op, table, nil, err)
	}
	var tc *types.TransactionConflictException
	if errors.As(err, &tc) {
		return newCallError(op, table, store.ErrConflict, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ValidationException":
			return newCallError(op, table, store.ErrInvalid, err)
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
			// Still throttled after the client's retries (or its retry quota spent).
			return newCallError(op, table, store.ErrThrottled, err)
		}
	}
	return newCallError(op, table, nil, err)
}

func conditionError(index int, old map[string]types.AttributeValue, a *layout) error {
	ce := &store.ConditionError{Index: index}
	if len(old) > 0 {
		it, err := a.decodeItem(old)
		if err != nil {
			return err
		}
		ce.Old = &it
	}
	return ce
}

func newCallError(op, table string, kind, err error) *CallError {
	e := &CallError{Op: op, Table: table, kind: kind, cause: err}
	var api smithy.APIError
	if errors.As(err, &api) {
		// The API error's own message: the wrapping ResponseError adds the request id.
		e.Code, e.Msg = api.ErrorCode(), api.ErrorMessage()
	} else {
		e.Msg = transportMessage(err)
	}
	if e.Code == "TransactionCanceledException" {
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			e.Msg = fmt.Sprintf("cancelled: %s", reasonCodes(tce.CancellationReasons))
		}
	}
	return e
}

// transportMessage describes a request that got no answer from DynamoDB. The SDK's own text
// carries the endpoint URL and an empty request id, so it is rebuilt from the parts.
func transportMessage(err error) string {
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ctxErr) {
			return ctxErr.Error()
		}
	}
	msg := "request failed"
	var ma *retry.MaxAttemptsError
	if errors.As(err, &ma) {
		msg += fmt.Sprintf(" after %d attempts", ma.Attempt)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		msg += ": " + op.Err.Error()
	}
	return msg
}

func reasonCodes(rs []types.CancellationReason) []string {
	codes := make([]string, len(rs))
	for i, r := range rs {
		codes[i] = stringOf(r.Code)
	}
	return codes
}

func stringOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
