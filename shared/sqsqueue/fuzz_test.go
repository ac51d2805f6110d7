package sqsqueue

import (
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// FuzzDecode: the message attributes and system attributes come off the network.
func FuzzDecode(f *testing.F) {
	f.Add("id-1", `{"a":1}`, "rh", "1", "1700000000123", "provider", "stripe")
	f.Add("", "", "", "", "", "", "")
	f.Add("id", "b", "rh", "-1", "x", "k", "v")
	f.Add("id", "b", "rh", "99999999999999999999", "1", "k", "v")
	f.Fuzz(func(t *testing.T, id, body, rh, count, sent, k, v string) {
		m := types.Message{
			MessageId: aws.String(id), Body: aws.String(body), ReceiptHandle: aws.String(rh),
			Attributes:        map[string]string{"ApproximateReceiveCount": count, "SentTimestamp": sent},
			MessageAttributes: map[string]types.MessageAttributeValue{k: {DataType: aws.String("String"), StringValue: aws.String(v)}},
		}
		msg, err := decode(m)
		if err != nil {
			if !errors.Is(err, ErrBadResponse) {
				t.Fatalf("error %v is not ErrBadResponse", err)
			}
			return
		}
		if n, _ := strconv.Atoi(count); msg.ReceiveCount != n || n < 1 {
			t.Fatalf("ReceiveCount %d from %q", msg.ReceiveCount, count)
		}
		if msg.ID != id || string(msg.Body) != body || msg.Attributes[k] != v {
			t.Fatalf("decoded %+v from id %q body %q %q=%q", msg, id, body, k, v)
		}
	})
}
