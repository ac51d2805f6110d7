package localqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/queue"
)

var benchBody = []byte(`{"id":"evt_1NXs0aLkdIwHu7ix","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3NXs0a","amount":2000,"currency":"usd","status":"succeeded"}}}`)

// BenchmarkSend is fsync'd sends from 16 concurrent senders, which share commits.
func BenchmarkSend(b *testing.B) {
	q := mustQueue(b, newBroker(b, clock.Real()), "q", Config{})
	b.SetParallelism(8) // 8 x GOMAXPROCS senders
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := q.Send(context.Background(), benchBody, queue.SendOptions{Attributes: map[string]string{"provider": "stripe"}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkEndToEnd is the webhook path's queue share: 16 senders (the ingest handler's
// concurrent requests) and a Consumer with 4 pollers of batches of 10 that deletes each
// message, all on one fsync'd file. One op is one message sent, received and deleted.
func BenchmarkEndToEnd(b *testing.B) {
	q := mustQueue(b, newBroker(b, clock.Real()), "q", Config{DeadLetter: "dlq", MaxReceiveCount: 5})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled atomic.Int64
	all := make(chan struct{})
	n := int64(b.N)
	c := &queue.Consumer{
		Queue: q, BatchSize: 10, Concurrency: 4, Visibility: 30 * time.Second, Wait: time.Second,
		Handler: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			if handled.Add(int64(len(ev.Records))) == n {
				close(all)
			}
			return events.SQSEventResponse{}, nil
		},
	}
	b.ReportAllocs()
	b.ResetTimer()
	go c.Run(ctx)
	var wg sync.WaitGroup
	const senders = 16
	for s := range senders {
		wg.Go(func() {
			for i := s; i < b.N; i += senders {
				if _, err := q.Send(ctx, benchBody, queue.SendOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	<-all
	// Wait for the last deletes: the queue is empty when every message is gone.
	for {
		s, err := q.Stats()
		if err != nil {
			b.Fatal(err)
		}
		if s == (Stats{}) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
