package batch

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A marker reads back as Kafka's clients read it (kmsg's RecordBatch,
// ControlRecordKey and EndTxnMarker) and through ParseEndTxnMarker.
func TestEndTxnMarkerRoundTrip(t *testing.T) {
	for _, m := range []EndTxnMarker{{Commit: true, CoordinatorEpoch: 5}, {Commit: false, CoordinatorEpoch: 0}} {
		b := BuildEndTxnMarker(42, 7, m, 1_700_000_000_000)
		SetBaseOffset(b, 100)
		_, err := ValidateStored(b)
		require.NoError(t, err, "a stored batch: framing and CRC")

		var rb kmsg.RecordBatch
		require.NoError(t, rb.ReadFrom(b))
		require.Equal(t, int64(42), rb.ProducerID)
		require.Equal(t, int16(7), rb.ProducerEpoch)
		require.Equal(t, int32(-1), rb.FirstSequence)
		require.Equal(t, int16(0x30), rb.Attributes, "transactional | control, uncompressed, CreateTime")
		require.Equal(t, int32(1), rb.NumRecords)
		// One record: its length varint, then the record kmsg reads.
		n, used := binary.Varint(rb.Records)
		require.Positive(t, used)
		require.Equal(t, len(rb.Records)-used, int(n))
		var rec kmsg.Record
		require.NoError(t, rec.ReadFrom(rb.Records))
		var key kmsg.ControlRecordKey
		require.NoError(t, key.ReadFrom(rec.Key))
		wantType := kmsg.ControlRecordKeyTypeAbort
		if m.Commit {
			wantType = kmsg.ControlRecordKeyTypeCommit
		}
		require.Equal(t, wantType, key.Type)
		var val kmsg.EndTxnMarker
		require.NoError(t, val.ReadFrom(rec.Value))
		require.Equal(t, m.CoordinatorEpoch, val.CoordinatorEpoch)

		got, err := ParseEndTxnMarker(b)
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
}

// Markers other than an end-transaction one, and malformed ones, are
// refused with the kind of error the caller acts on.
func TestParseEndTxnMarkerRejects(t *testing.T) {
	control := func(key, value []byte) []byte {
		return Build(Header{Attributes: TransactionalBit | ControlBit, ProducerID: 1, BaseSequence: -1},
			[]Record{{Key: key, Value: value}})
	}
	u16 := func(v ...int16) []byte {
		var b []byte
		for _, x := range v {
			b = binary.BigEndian.AppendUint16(b, uint16(x))
		}
		return b
	}
	okValue := append(u16(0), 0, 0, 0, 3)

	_, err := ParseEndTxnMarker(control(u16(0, 2), okValue))
	require.ErrorIs(t, err, ErrNotMarker, "a leader-change record (type 2)")

	for name, b := range map[string][]byte{
		"data batch":     producerBatch(1, 3),
		"short key":      control(u16(0), okValue),
		"negative key":   control(u16(-1, 1), okValue),
		"short value":    control(u16(0, 1), u16(0, 0)),
		"negative value": control(u16(0, 1), append(u16(-2), 0, 0, 0, 1)),
		"null key":       control(nil, okValue),
		"two records":    Build(Header{Attributes: ControlBit}, []Record{{Key: u16(0, 1), Value: okValue}, {OffsetDelta: 1, Key: u16(0, 1), Value: okValue}}),
		"no records":     Build(Header{Attributes: ControlBit, LastOffsetDelta: 0}, nil),
		"truncated":      control(u16(0, 1), okValue)[:HeaderSize+2],
		"garbage":        []byte("not a batch at all, but long enough to have a header of sixty-one bytes....."),
	} {
		_, err := ParseEndTxnMarker(b)
		require.Error(t, err, name)
		require.NotErrorIs(t, err, ErrNotMarker, name)
	}

	// Later versions of key and value add fields; they are read as version 0.
	m, err := ParseEndTxnMarker(control(append(u16(1, 1), 9, 9), append(u16(3), 0, 0, 0, 8, 1, 2)))
	require.NoError(t, err)
	require.Equal(t, EndTxnMarker{Commit: true, CoordinatorEpoch: 8}, m)
}

func FuzzParseEndTxnMarker(f *testing.F) {
	f.Add(BuildEndTxnMarker(1, 0, EndTxnMarker{Commit: true, CoordinatorEpoch: 3}, 0))
	f.Add(BuildEndTxnMarker(9, 2, EndTxnMarker{}, 5))
	f.Add(producerBatch(2, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseEndTxnMarker(b)
		if err != nil {
			return
		}
		again, err := ParseEndTxnMarker(BuildEndTxnMarker(1, 0, m, 0))
		if err != nil || again != m {
			t.Fatalf("marker %+v does not survive a rebuild: %+v, %v", m, again, err)
		}
	})
}
