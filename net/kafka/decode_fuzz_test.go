package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
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

// TestPrecheckProduceAcceptsRealRequests: every version's real encoding of
// a produce request with several topics passes the precheck, and a frame
// claiming far more topics than it can hold is refused.
func TestPrecheckProduceAcceptsRealRequests(t *testing.T) {
	for v := int16(3); v <= 11; v++ {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = v, -1
		for _, name := range []string{"a", "orders", "x"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = name
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = nil
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		body := req.AppendTo(nil)
		if err := precheckProduce(v, body); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		decoded, err := decodeRequest(encodeRequest(req, 1))
		if err != nil || decoded.kreq == nil {
			t.Fatalf("v%d: decode: %v", v, err)
		}
	}
	// 1,000,000 topics claimed in a 100-byte body.
	hostile := []byte{0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40}
	hostile = append(hostile, make([]byte, 100)...)
	if err := precheckProduce(3, hostile); err == nil {
		t.Fatal("a frame claiming 1e6 topics in 100 bytes must be refused")
	}
}

// Finding 8 of issue 10: malformed requests were logged with kmsg's
// client-side wording, "response did not contain enough data".
func TestTruncatedRequestIsCalledARequest(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	topic := "some-topic"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	body := encodeRequest(req, 1)
	_, err := decodeRequest(body[:len(body)-4])
	require.Error(t, err)
	require.NotContains(t, err.Error(), "response")
	require.Contains(t, err.Error(), "request ends before its fields do")
}
