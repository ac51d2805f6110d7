package feed

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/runtwice/twice/shared/payments"
)

func TestParseCursor(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "17": 17, "00042": 42, "9223372036854775807": 9223372036854775807} {
		if got, err := ParseCursor(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "x1", "1.5", " 1", "99999999999999999999", "123456789012345678901"} {
		if _, err := ParseCursor(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0", "42", "-1", "x", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCursor(s)
		if err != nil {
			return
		}
		if n < 0 || (s != "" && strconv.FormatInt(n, 10) != trimZeros(s)) {
			t.Fatalf("%q parsed as %d", s, n)
		}
	})
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

// TestPublishOncePerChangeInOrder: a redelivered change is not published again, an older one
// after a newer is superseded, a newer write with the same view is no change; the rest get
// sequences 1, 2, 3 and cursors in publication order.
func TestPublishOncePerChangeInOrder(t *testing.T) {
	st := openLogStore(t)
	log := &Log{Store: st}
	pub := &Publisher{Store: st, Sink: log, Log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	view := func(status string, refunded int64) payments.View {
		return payments.View{ID: "pay_1", Status: status, Amount: 2000, Currency: "usd", AmountRefunded: refunded}
	}
	for _, c := range []payments.Change{
		{PaymentID: "pay_1", Version: 10, Payment: view("succeeded", 0)},
		{PaymentID: "pay_1", Version: 10, Payment: view("succeeded", 0)},   // redelivered
		{PaymentID: "pay_1", Version: 11, Payment: view("succeeded", 0)},   // our own record of the same state
		{PaymentID: "pay_1", Version: 20, Payment: view("succeeded", 500)}, // a partial refund
		{PaymentID: "pay_1", Version: 15, Payment: view("processing", 0)},  // late and older: superseded
		{PaymentID: "pay_2", Version: 5, Payment: payments.View{ID: "pay_2", Status: "declined"}},
		{PaymentID: "pay_1", Version: 30, Payment: view("refunded", 2000)},
	} {
		if err := pub.Publish(ctx, fmt.Sprintf("change#%s#%d", c.PaymentID, c.Version), c); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := log.Read(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%s %s #%d v%d @%s", ev.PaymentID, ev.Type, ev.Sequence, ev.Version, ev.Cursor))
	}
	want := "[pay_1 payment.succeeded #1 v10 @1 pay_1 payment.succeeded #2 v20 @2 pay_2 payment.declined #1 v5 @3 pay_1 payment.refunded #3 v30 @4]"
	if fmt.Sprint(got) != want {
		t.Fatalf("feed %v\nwant %s", got, want)
	}
	if after, _ := log.Read(ctx, 2, 100); len(after) != 2 || after[0].Cursor != "3" {
		t.Fatalf("after cursor 2: %+v", after)
	}
	// A long poll with nothing new returns at its wait, empty.
	if evs, err := log.Wait(ctx, 4, 10, 50*time.Millisecond); err != nil || len(evs) != 0 {
		t.Fatalf("wait: %v %v", evs, err)
	}
}
