package declines_test

import (
	"fmt"

	"github.com/runtwice/twice/shared/declines"
)

func ExampleClassify() {
	for _, d := range []declines.Decline{
		{Code: "insufficient_funds", Network: declines.NetworkVisa},
		{Code: "generic_decline", NetworkDeclineCode: "43", Network: declines.NetworkVisa},
		{Code: "insufficient_funds", NetworkAdviceCode: "25", Network: declines.NetworkMastercard},
	} {
		c := declines.Classify(d)
		fmt.Printf("%s %s retry=%v (%s) %s\n", c.Class, c.Action, c.Retryable, c.Source, c.Explanation)
	}
	// Output:
	// limit retry_when_funded retry=true (decline_code) The card issuer declined: insufficient funds.
	// hard new_payment_method retry=false (network_code) The card issuer declined with response code 43: the card was reported stolen.
	// limit retry_after retry=true (mac) Mastercard advised: retry after 24 hours.
}

func ExampleParseDecline() {
	d, err := declines.ParseDecline([]byte(`{"code":"card_velocity_exceeded","network":"visa"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(declines.Classify(d).Explanation)
	// Output: The card issuer declined: the card's spending limit was reached.
}
