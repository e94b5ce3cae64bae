package kafka

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch responses are written without copying their record sets into the
// write buffer: the fields are encoded into a small buffer, and the record
// bytes go to the socket straight from the buffers the log read them into.
// That halves the memory a large fetch reply holds and saves a copy of
// every byte a consumer reads. The encoding is kmsg's, byte for byte (a
// test compares the two over random responses of every version served).

// fetchPieceVersions are the versions encodeFetchPieces knows; others are
// encoded by kmsg whole.
const minFetchPieces, maxFetchPieces = 4, 12

// piece is a stretch of an encoded response: buf[a:b] of the field
// buffer, or a record set.
type piece struct {
	a, b int
	rec  []byte
}

// encodeFetchPieces appends resp's encoding to buf, except that each
// record set is referenced rather than copied. It returns the grown buffer
// and the pieces that, in order, make up the encoding.
func encodeFetchPieces(buf []byte, pieces []piece, resp *kmsg.FetchResponse) ([]byte, []piece) {
	v := resp.Version
	flex := v >= 12
	mark := len(buf)
	cut := func(rec []byte) {
		pieces = append(pieces, piece{a: mark, b: len(buf)}, piece{rec: rec})
		mark = len(buf)
	}
	arrayLen := func(n int) {
		if flex {
			buf = kbin.AppendCompactArrayLen(buf, n)
		} else {
			buf = kbin.AppendArrayLen(buf, n)
		}
	}
	tagsWithCount := func(t *kmsg.Tags) {
		buf = kbin.AppendUvarint(buf, uint32(t.Len()))
		buf = t.AppendEach(buf)
	}

	buf = kbin.AppendInt32(buf, resp.ThrottleMillis)
	if v >= 7 {
		buf = kbin.AppendInt16(buf, resp.ErrorCode)
		buf = kbin.AppendInt32(buf, resp.SessionID)
	}
	arrayLen(len(resp.Topics))
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if flex {
			buf = kbin.AppendCompactString(buf, t.Topic)
		} else {
			buf = kbin.AppendString(buf, t.Topic)
		}
		arrayLen(len(t.Partitions))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			buf = kbin.AppendInt32(buf, p.Partition)
			buf = kbin.AppendInt16(buf, p.ErrorCode)
			buf = kbin.AppendInt64(buf, p.HighWatermark)
			buf = kbin.AppendInt64(buf, p.LastStableOffset)
			if v >= 5 {
				buf = kbin.AppendInt64(buf, p.LogStartOffset)
			}
			if flex {
				buf = kbin.AppendCompactNullableArrayLen(buf, len(p.AbortedTransactions), p.AbortedTransactions == nil)
			} else {
				buf = kbin.AppendNullableArrayLen(buf, len(p.AbortedTransactions), p.AbortedTransactions == nil)
			}
			for k := range p.AbortedTransactions {
				a := &p.AbortedTransactions[k]
				buf = kbin.AppendInt64(buf, a.ProducerID)
				buf = kbin.AppendInt64(buf, a.FirstOffset)
				if flex {
					tagsWithCount(&a.UnknownTags)
				}
			}
			if v >= 11 {
				buf = kbin.AppendInt32(buf, p.PreferredReadReplica)
			}
			// The record set: its length here, its bytes as their own piece.
			switch {
			case p.RecordBatches == nil && flex:
				buf = kbin.AppendUvarint(buf, 0)
			case p.RecordBatches == nil:
				buf = kbin.AppendInt32(buf, -1)
			case flex:
				buf = kbin.AppendUvarint(buf, uint32(len(p.RecordBatches)+1))
			default:
				buf = kbin.AppendInt32(buf, int32(len(p.RecordBatches)))
			}
			if len(p.RecordBatches) > 0 {
				cut(p.RecordBatches)
			}
			if flex {
				buf = appendFetchPartitionTags(buf, p)
			}
		}
		if flex {
			tagsWithCount(&t.UnknownTags)
		}
	}
	if flex {
		tagsWithCount(&resp.UnknownTags) // NodeEndpoints (tag 0) is v16+
	}
	pieces = append(pieces, piece{a: mark, b: len(buf)})
	return buf, pieces
}

// appendFetchPartitionTags encodes a partition's tagged fields as kmsg
// does: DivergingEpoch (0), CurrentLeader (1) and SnapshotID (2) when they
// are not at their defaults, then unknown tags.
func appendFetchPartitionTags(buf []byte, p *kmsg.FetchResponseTopicPartition) []byte {
	type tagged struct {
		tag  uint32
		body []byte
	}
	var ts []tagged
	if d := p.DivergingEpoch; d.Epoch != -1 || d.EndOffset != -1 || d.UnknownTags.Len() > 0 {
		b := kbin.AppendInt64(kbin.AppendInt32(nil, d.Epoch), d.EndOffset)
		ts = append(ts, tagged{0, appendTagsWithCount(b, &d.UnknownTags)})
	}
	if l := p.CurrentLeader; l.LeaderID != -1 || l.LeaderEpoch != -1 || l.UnknownTags.Len() > 0 {
		b := kbin.AppendInt32(kbin.AppendInt32(nil, l.LeaderID), l.LeaderEpoch)
		ts = append(ts, tagged{1, appendTagsWithCount(b, &l.UnknownTags)})
	}
	if s := p.SnapshotID; s.EndOffset != -1 || s.Epoch != -1 || s.UnknownTags.Len() > 0 {
		b := kbin.AppendInt32(kbin.AppendInt64(nil, s.EndOffset), s.Epoch)
		ts = append(ts, tagged{2, appendTagsWithCount(b, &s.UnknownTags)})
	}
	buf = kbin.AppendUvarint(buf, uint32(len(ts)+p.UnknownTags.Len()))
	for _, t := range ts {
		buf = kbin.AppendUvarint(buf, t.tag)
		buf = kbin.AppendUvarint(buf, uint32(len(t.body)))
		buf = append(buf, t.body...)
	}
	return p.UnknownTags.AppendEach(buf)
}

func appendTagsWithCount(buf []byte, t *kmsg.Tags) []byte {
	buf = kbin.AppendUvarint(buf, uint32(t.Len()))
	return t.AppendEach(buf)
}
