package dynamo

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// CapacityCounter sums the write and read capacity units DynamoDB reports for a client's calls:
// it asks for them on every call (ReturnConsumedCapacity TOTAL) and adds up what comes back, so
// a test can state what a code path is billed ("a new payment costs 7 write units"). DynamoDB
// Local reports units as DynamoDB computes them (1 per KB written, doubled in a transaction).
type CapacityCounter struct {
	mu          sync.Mutex
	write, read float64
}

// Middleware returns the stack option to add to a client's APIOptions.
func (c *CapacityCounter) Middleware() func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("twiceCapacityCounter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				total := types.ReturnConsumedCapacityTotal
				switch p := in.Parameters.(type) {
				case *dynamodb.PutItemInput:
					p.ReturnConsumedCapacity = total
				case *dynamodb.UpdateItemInput:
					p.ReturnConsumedCapacity = total
				case *dynamodb.DeleteItemInput:
					p.ReturnConsumedCapacity = total
				case *dynamodb.TransactWriteItemsInput:
					p.ReturnConsumedCapacity = total
				case *dynamodb.GetItemInput:
					p.ReturnConsumedCapacity = total
				}
				out, md, err := next.HandleInitialize(ctx, in)
				var cc []types.ConsumedCapacity
				read := false
				switch r := out.Result.(type) {
				case *dynamodb.PutItemOutput:
					cc = optional(r.ConsumedCapacity)
				case *dynamodb.UpdateItemOutput:
					cc = optional(r.ConsumedCapacity)
				case *dynamodb.DeleteItemOutput:
					cc = optional(r.ConsumedCapacity)
				case *dynamodb.TransactWriteItemsOutput:
					cc = r.ConsumedCapacity
				case *dynamodb.GetItemOutput:
					cc, read = optional(r.ConsumedCapacity), true
				}
				c.add(cc, read)
				return out, md, err
			}), middleware.Before)
	}
}

func optional(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

// add counts a call's units: TOTAL reports CapacityUnits, of the call's kind.
func (c *CapacityCounter) add(cc []types.ConsumedCapacity, read bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range cc {
		if u.CapacityUnits == nil {
			continue
		}
		if read {
			c.read += *u.CapacityUnits
		} else {
			c.write += *u.CapacityUnits
		}
	}
}

// Units returns the write and read units so far.
func (c *CapacityCounter) Units() (write, read float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.write, c.read
}

// Reset forgets the units.
func (c *CapacityCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.write, c.read = 0, 0
}
