package attempts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/runtwice/twice/shared/clock"
	"github.com/runtwice/twice/shared/redact/redacttest"
)

// luhnKey completes prefix (digits) with the check digit that makes it Luhn-valid.
func luhnKey(prefix string) string {
	for d := '0'; d <= '9'; d++ {
		if k := prefix + string(d); redacttest.Luhn(k) {
			return k
		}
	}
	panic("unreachable")
}

// TestLookupKeyNeverMixesKeys is the lookup's property: whatever keys and scopes callers use,
// a lookup of one (scope, key) returns exactly the attempts made with it. The keys are drawn
// to collide as redaction would have merged them: Luhn-valid numbers of 13-19 digits ending
// in the same four digits (masked alike), and keys longer than the cap that share their
// first 255 bytes. Every stored record is checked for a surviving card number too.
func TestLookupKeyNeverMixesKeys(t *testing.T) {
	c := clock.NewFake(t0)
	ctx := context.Background()
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		l, _ := newLog(t, Log{PageSize: 100}, c) // a fresh log: each round's pairs are the whole truth
		key := rapid.OneOf(
			// 13-19 digits, Luhn-valid, ending in 0042 before the check digit.
			rapid.Custom(func(rt *rapid.T) string {
				n := rapid.IntRange(8, 14).Draw(rt, "middle")
				return luhnKey("1" + rapid.StringOfN(rapid.RuneFrom([]rune("0123456789")), n, n, -1).Draw(rt, "digits") + "004")
			}),
			rapid.Custom(func(rt *rapid.T) string {
				return strings.Repeat("k", 255) + rapid.StringMatching(`[a-z0-9]{1,4}`).Draw(rt, "tail")
			}),
			rapid.StringMatching(`order-[0-9]{1,3}`),
		)
		scope := rapid.SampledFrom([]string{"local", "jwt:client-a", "jwt:client-b"})
		type pair struct{ scope, key string }
		pairs := rapid.SliceOfNDistinct(rapid.Custom(func(rt *rapid.T) pair {
			return pair{scope.Draw(rt, "scope"), key.Draw(rt, "key")}
		}), 2, 6, func(p pair) pair { return p }).Draw(rt, "pairs")
		want := map[pair][]string{}
		for i, p := range pairs {
			for j := range rapid.IntRange(1, 2).Draw(rt, "requests") {
				id := fmt.Sprintf("att_r%d_%d_%d", round, i, j)
				body := fmt.Sprintf(`{"amount":2000,"note":"order %s"}`, p.key)
				err := l.Record(ctx, Attempt{ID: id, Direction: Inbound, Provider: "api", Operation: "payments.create",
					Scope: p.scope, IdempotencyKey: p.key, PaymentID: "pay_" + id,
					RequestHeader: map[string]string{"Idempotency-Key": p.key, "Content-Type": "application/json"},
					RequestBody:   body})
				if err != nil {
					rt.Fatal(err)
				}
				want[p] = append(want[p], id)
				got, err := l.Get(ctx, id)
				if err != nil {
					rt.Fatal(err)
				}
				doc, _ := json.Marshal(got)
				if c := redacttest.LeakedCard(string(doc)); c != "" {
					rt.Fatalf("card number %q survived in %s", c, doc)
				}
			}
		}
		for _, p := range pairs {
			page, err := l.LookupKey(ctx, p.scope, p.key, "")
			if err != nil {
				rt.Fatal(err)
			}
			var got []string
			for _, a := range page.Attempts {
				got = append(got, a.ID)
			}
			if len(got) != len(want[p]) {
				rt.Fatalf("lookup (%s, %.20s…) = %v, want %v", p.scope, p.key, got, want[p])
			}
			for _, id := range got {
				if !strings.Contains(strings.Join(want[p], " "), id) {
					rt.Fatalf("lookup (%s, %.20s…) returned %s, another key's attempt", p.scope, p.key, id)
				}
			}
		}
	})
}

// TestNumericKeysEndingAlike: the two order keys that once shared a lookup (both Luhn-valid,
// both masked "[card ****0042]") each find only their own request.
func TestNumericKeysEndingAlike(t *testing.T) {
	c := clock.NewFake(t0)
	l, _ := newLog(t, Log{}, c)
	ctx := context.Background()
	keys := []string{"1000000090042", "1000000170042"}
	for _, k := range keys {
		if !redacttest.Luhn(k) {
			t.Fatalf("%s is not Luhn-valid: the test would prove nothing", k)
		}
		if err := l.Record(ctx, Attempt{ID: "att_" + k, Scope: "local", IdempotencyKey: k, Operation: "payments.create"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		page, err := l.LookupKey(ctx, "local", k, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Attempts) != 1 || page.Attempts[0].ID != "att_"+k {
			t.Errorf("lookup %s: %+v, want only att_%s", k, page.Attempts, k)
		}
		if other, _ := l.LookupKey(ctx, "jwt:someone-else", k, ""); len(other.Attempts) != 0 {
			t.Errorf("another caller's lookup of %s found %d attempts", k, len(other.Attempts))
		}
	}
}
