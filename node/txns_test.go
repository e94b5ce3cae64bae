package node

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/txncoord"
)

// A peer's WriteTxnMarkers answer is read by producer and partition: one
// shorter or shaped otherwise than the request cannot index past it, and
// what it leaves out is simply not there.
func TestMarkerCodesReadByName(t *testing.T) {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	m := kmsg.NewWriteTxnMarkersResponseMarker()
	m.ProducerID = 7
	m.Topics = []kmsg.WriteTxnMarkersResponseMarkerTopic{{Topic: "t", Partitions: []kmsg.WriteTxnMarkersResponseMarkerTopicPartition{{Partition: 1, ErrorCode: 6}}}}
	resp.Markers = append(resp.Markers, m, kmsg.NewWriteTxnMarkersResponseMarker()) // and one with no topics
	codes := markerCodes(resp)
	code, ok := codes[markerKey{7, txncoord.TP{Topic: "t", Partition: 1}}]
	require.True(t, ok)
	require.Equal(t, int16(6), code)
	_, ok = codes[markerKey{7, txncoord.TP{Topic: "t", Partition: 0}}]
	require.False(t, ok)
	require.Empty(t, markerCodes(kmsg.NewPtrWriteTxnMarkersResponse()))
}
