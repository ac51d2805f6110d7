package resolvequeue

import (
	"context"

	"github.com/runtwice/twice/shared/idempotency/idemlambda"
	"github.com/runtwice/twice/shared/payments"
	"github.com/runtwice/twice/shared/queue"
)

// Consumer runs resolve jobs. Service (with its Keeper) is required.
type Consumer struct {
	Service *payments.Service
}

// Handle runs one message of the resolve queue, once per message id.
func (c Consumer) Handle(ctx context.Context, m queue.Message) error {
	h, err := idemlambda.Message(idemlambda.Config[struct{}]{Keeper: c.Service.Keeper, KeyPrefix: payments.ResolveScope,
		Log: c.Service.Log}, c.Service.ResolveMessage)
	if err != nil {
		return err
	}
	return h(ctx, m)
}
