package kafka

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/broker"
)

// Fetch sessions (KIP-227) are optional for a broker: answering SessionID 0
// tells clients to keep sending full fetches, which is what MoonMQ does.

func (c *conn) handleFetch(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.FetchRequest)
	if req.SessionID != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	resp, bytes, _ := c.fetchOnce(req)
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	// Like Kafka, a partition error (out of range, unknown partition)
	// answers at once: the client has to act on it, waiting helps nobody.
	if bytes >= int(req.MinBytes) || maxWait <= 0 || fetchHasError(resp) {
		return resp, nil
	}
	return nil, func() kmsg.Response {
		deadline := time.Now().Add(maxWait)
		ctx, cancel := context.WithDeadline(c.ctx, deadline)
		defer cancel()
		for {
			// Take the notification channels before reading, so an append
			// between the read and the wait still wakes us.
			resp, bytes, changed := c.fetchOnce(req)
			if bytes >= int(req.MinBytes) || ctx.Err() != nil || len(changed) == 0 || c.draining() {
				return resp
			}
			broker.WaitAny(ctx, append(changed, c.s.draining))
		}
	}
}

// fetchOnce reads every requested partition once. It returns the response,
// the record bytes it holds, and the change channels of the partitions read
// (captured before reading).
func (c *conn) fetchOnce(req *kmsg.FetchRequest) (*kmsg.FetchResponse, int, []<-chan struct{}) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	// The client's sizes are capped by the broker's, so one consumer cannot
	// make the broker buffer gigabytes (Kafka's fetch.max.bytes).
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 || maxBytes > c.s.opts.FetchMaxBytes {
		maxBytes = c.s.opts.FetchMaxBytes
	}
	remaining := maxBytes
	total := 0
	var changed []<-chan struct{}
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.RecordBatches = []byte{} // librdkafka rejects a null record set
			part, err := c.s.broker.Partition(broker.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			if err != nil {
				rp.ErrorCode = c.errCode(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			l := part.Log()
			changed = append(changed, l.Changed())
			hw := l.HighWatermark()
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, hw, l.LogStartOffset()
			if remaining > 0 {
				limit := min(max(int(p.PartitionMaxBytes), 0), remaining)
				data, err := l.ReadAppend(getFetchBuf(), p.FetchOffset, limit, hw)
				if err != nil {
					rp.ErrorCode = c.errCode(err)
				} else if len(data) > 0 {
					rp.RecordBatches = data
					remaining -= len(data)
					total += len(data)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, total, changed
}

// fetchBufs recycles the buffers partitions are read into. A consumer
// streaming a log reads megabytes per request; allocating them fresh makes
// the garbage collector, not the disk or the socket, the bottleneck.
var fetchBufs sync.Pool // of *[]byte

func getFetchBuf() []byte {
	if p, ok := fetchBufs.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

func fetchHasError(resp *kmsg.FetchResponse) bool {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}

// countFetch adds a written fetch response to the per-topic out metrics.
func (m *Metrics) countFetch(resp *kmsg.FetchResponse) {
	for _, t := range resp.Topics {
		var bytes, records int
		for _, p := range t.Partitions {
			if len(p.RecordBatches) == 0 {
				continue
			}
			bytes += len(p.RecordBatches)
			_ = batch.Iterate(p.RecordBatches, func(h batch.Header, _ []byte) bool {
				records += int(h.NumRecords)
				return true
			})
		}
		if bytes > 0 {
			m.bytesOut.WithLabelValues(t.Topic).Add(float64(bytes))
			m.recordsOut.WithLabelValues(t.Topic).Add(float64(records))
		}
	}
}

// recycleFetch returns a written fetch response's record buffers to the
// pool. The caller must hold the only reference to resp.
func recycleFetch(resp *kmsg.FetchResponse) {
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			b := resp.Topics[ti].Partitions[pi].RecordBatches
			if cap(b) >= 64<<10 {
				b = b[:0]
				fetchBufs.Put(&b)
			}
			resp.Topics[ti].Partitions[pi].RecordBatches = nil
		}
	}
}

// encodedSizeHint estimates a response's encoded size so the write buffer
// grows once instead of doubling through every record set it copies.
func encodedSizeHint(resp kmsg.Response) int {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 64
	for _, t := range f.Topics {
		n += len(t.Topic) + 32
		for _, p := range t.Partitions {
			n += len(p.RecordBatches) + 64 + 16*len(p.AbortedTransactions)
		}
	}
	return n
}
