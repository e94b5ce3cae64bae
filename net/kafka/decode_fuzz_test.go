package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedRequests are real encodings of the requests MoonMQ serves, at their
// highest supported versions, so the fuzzer starts from valid shapes.
func seedRequests() [][]byte {
	var out [][]byte
	for key, a := range apis {
		for _, v := range []int16{a.min, a.max} {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.MetadataRequest:
				t := "orders"
				r.Topics = []kmsg.MetadataRequestTopic{{Topic: &t}}
			case *kmsg.ProduceRequest:
				r.Acks = -1
				r.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte{0, 1, 2}}}}}
			case *kmsg.FetchRequest:
				r.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 5, PartitionMaxBytes: 1 << 20}}}}
			case *kmsg.CreateTopicsRequest:
				v := "1000"
				r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t", NumPartitions: 3, ReplicationFactor: 1,
					Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: &v}}}}
			}
			out = append(out, encodeRequest(req, 7))
		}
	}
	return out
}

// encodeRequest builds a request body (no size prefix) with its header.
func encodeRequest(req kmsg.Request, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "cli"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// FuzzDecodeRequest: no input may panic the decoder, and whatever decodes
// must re-encode (the handlers only ever see well-formed kmsg values).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
	}
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body)
		if err != nil || req.kreq == nil {
			return
		}
		_ = req.kreq.AppendTo(nil)
	})
}

func TestDecodeSeedsRoundTrip(t *testing.T) {
	for _, s := range seedRequests() {
		req, err := decodeRequest(s)
		if err != nil {
			t.Fatalf("seed %v: %v", s[:4], err)
		}
		if req.kreq == nil {
			t.Fatalf("seed key %d v%d not decoded", req.key, req.version)
		}
	}
}
