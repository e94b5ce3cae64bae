package kafka

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func joinPieces(buf []byte, pieces []piece) []byte {
	var out []byte
	for _, p := range pieces {
		if p.rec != nil {
			out = append(out, p.rec...)
		} else {
			out = append(out, buf[p.a:p.b]...)
		}
	}
	return out
}

func randomFetchResponse(rng *rand.Rand, version int16) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	resp.ThrottleMillis, resp.ErrorCode, resp.SessionID = rng.Int32(), int16(rng.IntN(100)), rng.Int32()
	if rng.IntN(4) == 0 {
		resp.UnknownTags.Set(uint32(5+rng.IntN(10)), []byte("tag"))
	}
	for range rng.IntN(4) {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = string(bytes.Repeat([]byte{'a' + byte(rng.IntN(26))}, 1+rng.IntN(30)))
		if rng.IntN(4) == 0 {
			t.UnknownTags.Set(7, []byte{1, 2})
		}
		for range rng.IntN(5) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = rng.Int32(), int16(rng.IntN(80))
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()
			p.PreferredReadReplica = int32(rng.IntN(5)) - 1
			switch rng.IntN(3) {
			case 0:
				p.RecordBatches = nil
			case 1:
				p.RecordBatches = []byte{}
			default:
				p.RecordBatches = make([]byte, rng.IntN(300))
				for i := range p.RecordBatches {
					p.RecordBatches[i] = byte(rng.IntN(256))
				}
			}
			if rng.IntN(2) == 0 {
				for range rng.IntN(3) {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = rng.Int64(), rng.Int64()
					if rng.IntN(3) == 0 {
						a.UnknownTags.Set(3, []byte("x"))
					}
					p.AbortedTransactions = append(p.AbortedTransactions, a)
				}
				if p.AbortedTransactions == nil {
					p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				}
			}
			if rng.IntN(3) == 0 {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rng.Int32(), rng.Int64()
			}
			if rng.IntN(3) == 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = rng.Int32(), rng.Int32()
			}
			if rng.IntN(3) == 0 {
				p.SnapshotID.EndOffset, p.SnapshotID.Epoch = rng.Int64(), rng.Int32()
				p.SnapshotID.UnknownTags.Set(9, []byte("s"))
			}
			if rng.IntN(4) == 0 {
				p.UnknownTags.Set(11, []byte("p"))
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// The piecewise encoding is kmsg's, byte for byte, for every version served.
func TestFetchPiecesMatchKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for v := int16(minFetchPieces); v <= maxFetchPieces; v++ {
		for range 300 {
			resp := randomFetchResponse(rng, v)
			want := resp.AppendTo(nil)
			buf, pieces := encodeFetchPieces([]byte("prefix"), nil, resp)
			require.Equal(t, want, joinPieces(buf, pieces), "version %d", v)
		}
	}
}
