package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/runtwice/twice/shared/lambdaenv"
	"github.com/runtwice/twice/shared/store"
)

// maxBatchWrite is DynamoDB's BatchWriteItem limit: 25 put or delete requests.
const maxBatchWrite = 25

// PutAll implements store.Store with BatchWriteItem, 25 items a call. DynamoDB answers a
// batch that exceeds a partition's throughput by writing part of it and returning the rest as
// UnprocessedItems; those are sent again under the client's retry policy (its backoff, its
// retry quota, and in a Lambda function its deadline reserve), as a throttled call is. Items
// still unprocessed when the policy gives up make an error that matches store.ErrThrottled;
// the items written by then stay written.
func (s *Store) PutAll(ctx context.Context, table string, items ...store.Item) error {
	name, err := s.table(table)
	if err != nil {
		return err
	}
	if len(items) == 0 || len(items) > maxTransact {
		return fmt.Errorf("%w: %d items in one PutAll (1 to %d)", store.ErrInvalid, len(items), maxTransact)
	}
	a := s.attrsOf(table)
	type itemKey struct{ pk, sk string }
	seen := make(map[itemKey]bool, len(items))
	reqs := make([]types.WriteRequest, len(items))
	for i, it := range items {
		k := itemKey{it.PK, it.SK}
		if seen[k] {
			return fmt.Errorf("%w: two items with key %q/%q in one PutAll", store.ErrInvalid, it.PK, it.SK)
		}
		seen[k] = true
		av, err := a.encodeItem(it)
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: av}}
	}
	for len(reqs) > 0 {
		n := min(len(reqs), maxBatchWrite)
		if err := s.batchWrite(ctx, table, name, reqs[:n]); err != nil {
			return err
		}
		reqs = reqs[n:]
	}
	return nil
}

// batchWrite sends one BatchWriteItem and then what it leaves unprocessed until nothing is
// left or the retry policy stops.
func (s *Store) batchWrite(ctx context.Context, logical, name string, reqs []types.WriteRequest) error {
	left := map[string][]types.WriteRequest{name: reqs}
	var callErr error
	err := lambdaenv.Attempts(ctx, s.retryer, func(ctx context.Context) error {
		out, err := s.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: left})
		if err != nil {
			// The client's own retries have run already: another round of them would
			// multiply the calls, so a failed call ends here.
			callErr = err
			return nil
		}
		if n := len(out.UnprocessedItems[name]); n > 0 {
			left = map[string][]types.WriteRequest{name: out.UnprocessedItems[name]}
			return &unprocessedError{n: n}
		}
		return nil
	})
	if callErr != nil {
		err = callErr
	}
	if err != nil {
		return s.callError("BatchWriteItem", logical, err)
	}
	return nil
}

// unprocessedError is a BatchWriteItem answered with items left unprocessed. It carries the
// code of the exception DynamoDB throws when it can process none of them, so the retry policy
// treats it as the throttle it is and the store reports it as store.ErrThrottled.
type unprocessedError struct{ n int }

var _ smithy.APIError = (*unprocessedError)(nil)

func (e *unprocessedError) Error() string { return e.ErrorCode() + ": " + e.ErrorMessage() }
func (e *unprocessedError) ErrorCode() string {
	return "ProvisionedThroughputExceededException"
}
func (e *unprocessedError) ErrorMessage() string {
	return fmt.Sprintf("%d items left unprocessed", e.n)
}
func (e *unprocessedError) ErrorFault() smithy.ErrorFault { return smithy.FaultServer }

// retryerOf is the retry policy of client: its own when it is an SDK client (in a function,
// lambdaenv's), the SDK's standard one otherwise (a test's wrapper).
func retryerOf(client Client) aws.Retryer {
	if c, ok := client.(interface{ Options() dynamodb.Options }); ok {
		if r := c.Options().Retryer; r != nil {
			return r
		}
	}
	return retry.NewStandard()
}
