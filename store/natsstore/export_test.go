package natsstore

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"
)

// PutRecord writes name's record key as a tenure of token tok would have
// left it, for tests of the token's floor.
func PutRecord(ctx context.Context, js jetstream.JetStream, bucket, name string, tok int64) error {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return err
	}
	data, err := json.Marshal(value{Label: "gone", Instance: "gone", Token: tok, Seq: 1})
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, key("r", name), data)
	return err
}
