package main

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// A protobuf list's continue token is read from the envelope's raw list's
// ListMeta, and a list without one has none.
func TestProtobufContinue(t *testing.T) {
	msg := func(fields ...[]byte) []byte {
		var b []byte
		for _, f := range fields {
			b = append(b, f...)
		}
		return b
	}
	bytesField := func(n protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), v)
	}
	varintField := func(n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
	}
	listMeta := msg(bytesField(2, []byte("1234")), bytesField(3, []byte("eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ")), varintField(4, 9500))
	list := msg(bytesField(1, listMeta), bytesField(2, []byte("an item")))
	envelope := append([]byte("k8s\x00"), msg(bytesField(1, []byte("typemeta")), bytesField(2, list), bytesField(4, []byte("application/vnd.kubernetes.protobuf")))...)
	if got, err := continueOf(envelope, mediaProtobuf); err != nil || got != "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ" {
		t.Errorf("continue = %q, %v", got, err)
	}
	last := append([]byte("k8s\x00"), bytesField(2, msg(bytesField(1, bytesField(2, []byte("1"))), bytesField(2, []byte("x"))))...)
	if got, err := continueOf(last, mediaProtobuf); err != nil || got != "" {
		t.Errorf("the last page: continue = %q, %v; want none", got, err)
	}
	if _, err := continueOf([]byte(`{"kind":"PodList"}`), mediaProtobuf); err == nil {
		t.Error("JSON read as protobuf: want an error")
	}
	if got, _ := continueOf([]byte(`{"metadata":{"continue":"abc"},"items":[]}`), mediaJSON); got != "abc" {
		t.Errorf("JSON continue = %q", got)
	}
}
