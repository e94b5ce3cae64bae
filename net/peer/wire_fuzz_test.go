package peer

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf encodes resp as a leader would send it: size, correlation id,
// empty header tags (flexible), body.
func frameOf(resp kmsg.Response, corr int32) []byte {
	body := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.IsFlexible() {
		body = append(body, 0)
	}
	body = resp.AppendTo(body)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func seedFetch() kmsg.Response {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = fetchVersion
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark, rp.RecordBatches = 5, []byte("batches")
	rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 1, FirstOffset: 2}}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}

func seedEpochs() kmsg.Response {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.Version = epochsVersion
	rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	rp.LeaderEpoch, rp.EndOffset = 3, 40
	rt.Partitions = append(rt.Partitions, rp, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// The seeds decode, and answers claiming more than was asked are refused.
func TestResponseChecks(t *testing.T) {
	for _, resp := range []kmsg.Response{seedFetch(), seedEpochs()} {
		body, err := decodeFrame(frameOf(resp, 7), resp.Key(), 1, 2)
		require.NoError(t, err, "%T", resp)
		require.NotNil(t, body)
		_, err = decodeFrame(frameOf(resp, 7), resp.Key(), 1, 0)
		require.ErrorIs(t, err, errMalformed, "%T with no partition asked", resp)
		_, err = decodeFrame(frameOf(resp, 8), resp.Key(), 1, 2)
		require.ErrorIs(t, err, errMalformed, "%T with another correlation id", resp)
	}
	huge := binary.BigEndian.AppendUint32(nil, 1<<30)
	_, err := readFrame(bytes.NewReader(huge), nil, 1<<20)
	require.ErrorIs(t, err, errMalformed, "a frame past the limit is refused before it is read")
}

// decodeFrame is what roundTrip does with a frame for the fetcher's two
// answers (correlation id 7).
func decodeFrame(frame []byte, key int16, topics, partitions int) (kmsg.Response, error) {
	f, err := readFrame(bytes.NewReader(frame), nil, 1<<20)
	if err != nil {
		return nil, err
	}
	var (
		resp  kmsg.Response
		check func([]byte, int, int) error
	)
	if key == kmsg.Fetch.Int16() {
		r := kmsg.NewPtrFetchResponse()
		r.Version, resp, check = fetchVersion, r, checkFetchResponse
	} else {
		r := kmsg.NewPtrOffsetForLeaderEpochResponse()
		r.Version, resp, check = epochsVersion, r, checkEpochsResponse
	}
	body, err := responseBody(f, 7, true)
	if err != nil {
		return nil, err
	}
	if err := check(body, topics, partitions); err != nil {
		return nil, err
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, errMalformed
	}
	return resp, nil
}

// FuzzResponse: no answer a leader sends panics the fetcher, and one that
// passes the checks decodes to no more topics and partitions than asked.
func FuzzResponse(f *testing.F) {
	f.Add(frameOf(seedFetch(), 7), true)
	f.Add(frameOf(seedEpochs(), 7), false)
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 7, 0}, true)
	f.Fuzz(func(t *testing.T, frame []byte, fetch bool) {
		key := kmsg.OffsetForLeaderEpoch.Int16()
		if fetch {
			key = kmsg.Fetch.Int16()
		}
		resp, err := decodeFrame(frame, key, 2, 3)
		if err != nil {
			return
		}
		topics, partitions := answerSize(resp)
		require.LessOrEqual(t, topics, 2)
		require.LessOrEqual(t, partitions, 3)
	})
}

// answerSize counts the topics and partitions of a decoded answer.
func answerSize(resp kmsg.Response) (topics, partitions int) {
	switch r := resp.(type) {
	case *kmsg.FetchResponse:
		for _, t := range r.Topics {
			partitions += len(t.Partitions)
		}
		return len(r.Topics), partitions
	case *kmsg.OffsetForLeaderEpochResponse:
		for _, t := range r.Topics {
			partitions += len(t.Partitions)
		}
		return len(r.Topics), partitions
	}
	return 0, 0
}
