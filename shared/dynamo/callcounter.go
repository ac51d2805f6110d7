package dynamo

import (
	"context"
	"maps"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// CallCounter counts the requests a client sends, by operation name. It proves what a code
// path costs ("a duplicate costs one PutItem and no GetItem") in tests:
//
//	var calls dynamo.CallCounter
//	client := dynamo.NewClient(endpoint, func(o *dynamodb.Options) {
//		o.APIOptions = append(o.APIOptions, calls.Middleware())
//	})
//
// It sits at the end of the Finalize step, after the retry middleware, so an SDK retry counts
// as another request: what DynamoDB bills and what the latency pays.
type CallCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Middleware returns the stack option to add to a client's APIOptions.
func (c *CallCounter) Middleware() func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("twiceCallCounter",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				c.add(awsmiddleware.GetOperationName(ctx))
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

func (c *CallCounter) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = make(map[string]int)
	}
	c.counts[op]++
}

// Counts returns a copy of the counts so far, keyed by operation ("PutItem", ...).
func (c *CallCounter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Total returns the number of requests so far.
func (c *CallCounter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Reset forgets the counts.
func (c *CallCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}
