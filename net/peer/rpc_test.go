package peer

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker answers each request on its connections with what answer
// returns for the request's correlation id (raw frame bytes after the
// size).
func fakeBroker(t *testing.T, answer func(corr int32) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var size [4]byte
					if _, err := io.ReadFull(c, size[:]); err != nil {
						return
					}
					body := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(c, body); err != nil {
						return
					}
					corr := int32(binary.BigEndian.Uint32(body[4:8]))
					out := answer(corr)
					frame := binary.BigEndian.AppendUint32(nil, uint32(len(out)))
					if _, err := c.Write(append(frame, out...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func markersRequest() *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 7, 1, true
	tt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	tt.Topic, tt.Partitions = "t", []int32{0, 1}
	m.Topics = append(m.Topics, tt)
	req.Markers = append(req.Markers, m)
	return req
}

// flexible response frame: correlation id, empty header tags, body.
func responseFrame(corr int32, resp kmsg.Response) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.IsFlexible() {
		out = append(out, 0)
	}
	return resp.AppendTo(out)
}

// A good answer is returned; one naming more partitions than asked, or a
// frame over the limit, is an error and the connection is dropped (the
// next call dials again and works).
func TestCallerWriteTxnMarkers(t *testing.T) {
	mode := "ok"
	addr := fakeBroker(t, func(corr int32) []byte {
		resp := kmsg.NewPtrWriteTxnMarkersResponse()
		resp.Version = 1
		m := kmsg.NewWriteTxnMarkersResponseMarker()
		m.ProducerID = 7
		tt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
		tt.Topic = "t"
		n := 2
		switch mode {
		case "extra":
			n = 5
		case "huge":
			return make([]byte, 2<<20)
		}
		for p := range n {
			rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
			rp.Partition = int32(p)
			tt.Partitions = append(tt.Partitions, rp)
		}
		m.Topics = append(m.Topics, tt)
		resp.Markers = append(resp.Markers, m)
		return responseFrame(corr, resp)
	})
	c := NewCaller(CallerOptions{NodeID: 1, RequestTimeout: 5 * time.Second})
	defer c.Close()
	ctx := context.Background()
	resp, err := c.WriteTxnMarkers(ctx, 2, addr, markersRequest())
	require.NoError(t, err)
	require.Len(t, resp.Markers[0].Topics[0].Partitions, 2)

	mode = "extra"
	_, err = c.WriteTxnMarkers(ctx, 2, addr, markersRequest())
	require.ErrorIs(t, err, errMalformed)
	mode = "huge"
	_, err = c.WriteTxnMarkers(ctx, 2, addr, markersRequest())
	require.ErrorIs(t, err, errMalformed)
	mode = "ok"
	_, err = c.WriteTxnMarkers(ctx, 2, addr, markersRequest())
	require.NoError(t, err, "a new connection after the bad answers")

	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.WriteTxnMarkers(ctx2, 2, addr, markersRequest())
	require.Error(t, err)
	require.NoError(t, c.Close())
	_, err = c.WriteTxnMarkers(ctx, 2, addr, markersRequest())
	require.Error(t, err, "closed")
}
