package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/runtwice/twice/shared/feed"
	"github.com/runtwice/twice/shared/store"
)

// Source is the events' source.
const Source = "twice.payments"

// API is the one EventBridge call the sink makes; *eventbridge.Client satisfies it.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var _ API = (*eventbridge.Client)(nil)

// Sink puts feed events on Bus.
type Sink struct {
	API   API
	Bus   string
	Store store.Store
}

var _ feed.Sink = (*Sink)(nil)

// ErrRejected: EventBridge answered but did not take the entry (its error code follows).
var ErrRejected = errors.New("eventbus: entry rejected")

// Publish implements feed.Sink.
func (s *Sink) Publish(ctx context.Context, ev feed.Event, st store.Write) error {
	detail, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	at := ev.At
	out, err := s.API.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{{
		EventBusName: aws.String(s.Bus), Source: aws.String(Source), DetailType: aws.String(ev.Type),
		Detail: aws.String(string(detail)), Resources: []string{}, Time: &at,
	}}})
	if err != nil {
		return fmt.Errorf("eventbus: put %s: %w", ev.ID, err)
	}
	if out.FailedEntryCount > 0 {
		code := ""
		if len(out.Entries) > 0 && out.Entries[0].ErrorCode != nil {
			code = *out.Entries[0].ErrorCode
		}
		return fmt.Errorf("%w: %s: %s", ErrRejected, ev.ID, code)
	}
	if err := s.Store.Transact(ctx, st); err != nil {
		return fmt.Errorf("eventbus: publication state of %s: %w", ev.PaymentID, err)
	}
	return nil
}
