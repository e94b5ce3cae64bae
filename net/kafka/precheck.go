package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Decoding expands every array by the in-memory size of its elements. kmsg
// checks each array count against the bytes left assuming tiny elements (2
// bytes per produce topic), so a hostile Produce frame could decode into
// ~30x its size. precheckProduce rejects topic counts that a real request
// cannot have: every topic carries a non-empty name and at least one
// partition, so it takes at least minProduceTopicBytes on the wire. That
// bounds the expansion to a few times the frame, which the request budget
// then covers.
const (
	minProduceTopicBytes         = 2 + 1 + 4 + (4 + 4)         // name len, 1 name byte, partition count, one partition (index, null records)
	minProduceTopicBytesFlexible = 1 + 1 + 1 + (4 + 1 + 1) + 1 // same in compact encoding, with tag buffers
)

func precheckProduce(version int16, body []byte) error {
	flexible := version >= 9
	r := kbin.Reader{Src: body}
	if flexible {
		r.CompactNullableString() // transactional id
	} else {
		r.NullableString()
	}
	r.Int16() // acks
	r.Int32() // timeout
	var n int32
	if flexible {
		n = int32(r.Uvarint()) - 1
	} else {
		n = r.Int32()
	}
	if !r.Ok() {
		return fmt.Errorf("truncated produce request")
	}
	min := int64(minProduceTopicBytes)
	if flexible {
		min = minProduceTopicBytesFlexible
	}
	if int64(n)*min > int64(len(r.Src)) {
		return fmt.Errorf("produce request claims %d topics in %d bytes", n, len(r.Src))
	}
	return nil
}
