package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionOffsets is the retained range of one partition.
type PartitionOffsets struct {
	Partition int32 `json:"partition"`
	// Start is the log start offset (first retained record).
	Start int64 `json:"start"`
	// End is the high watermark: one past the last readable record.
	End int64 `json:"end"`
}

// Records returns End - Start.
func (p PartitionOffsets) Records() int64 { return max(p.End-p.Start, 0) }

// PartitionOffset is an offset found in one partition.
type PartitionOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Timestamp of the record at Offset; zero when Offset is the end of
	// the log (no record at or after the requested time).
	Timestamp time.Time `json:"timestamp"`
}

// ListOffsets returns every partition's log start and end offsets, sorted
// by partition.
func (c *Client) ListOffsets(ctx context.Context, topic string) ([]PartitionOffsets, error) {
	const op = "list offsets of"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	defer cancel()
	td, err := c.topicDetail(ctx, topic)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	out := make([]PartitionOffsets, 0, len(td.Partitions))
	for _, p := range td.Partitions.Numbers() {
		s, err := lookupOffset(starts, topic, p)
		if err != nil {
			return nil, wrap(op, partRes(topic, p), err)
		}
		e, err := lookupOffset(ends, topic, p)
		if err != nil {
			return nil, wrap(op, partRes(topic, p), err)
		}
		out = append(out, PartitionOffsets{Partition: p, Start: s.Offset, End: e.Offset})
	}
	return out, nil
}

// OffsetsForTimestamp returns, per partition, the first offset whose record
// timestamp is at or after t, or the end offset if there is none.
func (c *Client) OffsetsForTimestamp(ctx context.Context, topic string, t time.Time) ([]PartitionOffset, error) {
	const op = "find offsets by time in"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	defer cancel()
	td, err := c.topicDetail(ctx, topic)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	listed, err := c.adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
	if err != nil {
		return nil, wrap(op, topicRes(topic), err)
	}
	out := make([]PartitionOffset, 0, len(td.Partitions))
	for _, p := range td.Partitions.Numbers() {
		o, err := lookupOffset(listed, topic, p)
		if err != nil {
			return nil, wrap(op, partRes(topic, p), err)
		}
		po := PartitionOffset{Partition: p, Offset: o.Offset}
		if o.Timestamp >= 0 {
			po.Timestamp = time.UnixMilli(o.Timestamp)
		}
		out = append(out, po)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}

// DeleteRecords deletes every record of a partition before offset `before`
// by moving its log start offset there (-1 means up to the high watermark,
// i.e. everything). It returns the new log start offset.
func (c *Client) DeleteRecords(ctx context.Context, topic string, partition int32, before int64) (int64, error) {
	const op = "delete records of"
	res := partRes(topic, partition)
	if before < -1 {
		return 0, invalid(op, "offset %d (want >= 0, or -1 for the high watermark)", before)
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return 0, wrap(op, res, err)
	}
	defer cancel()
	var os kadm.Offsets
	os.AddOffset(topic, partition, before, -1)
	resps, err := c.adm.DeleteRecords(ctx, os)
	if err != nil {
		return 0, wrap(op, res, err)
	}
	r, err := resps.On(topic, partition, nil)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return 0, wrap(op, res, err)
	}
	return r.LowWatermark, nil
}

func lookupOffset(l kadm.ListedOffsets, topic string, p int32) (kadm.ListedOffset, error) {
	o, ok := l.Lookup(topic, p)
	if !ok {
		return o, kerr.UnknownTopicOrPartition
	}
	return o, o.Err
}

// EndOffsets returns topic -> partition -> high watermark for every
// partition of the given topics, in one ListOffsets round trip per broker
// (a dashboard refresh stays cheap however many topics there are). A topic
// that does not exist, or a partition whose leader did not answer, is left
// out; the error is non-nil only when nothing could be listed at all.
func (c *Client) EndOffsets(ctx context.Context, topics ...string) (map[string]map[int32]int64, error) {
	return c.listedOffsets(ctx, "list end offsets of", topics, c.adm.ListEndOffsets)
}

// StableOffsets is EndOffsets at read_committed isolation: the last stable
// offset of each partition, which trails the high watermark while a
// transaction is open on it. Brokers without transactions report the high
// watermark.
func (c *Client) StableOffsets(ctx context.Context, topics ...string) (map[string]map[int32]int64, error) {
	return c.listedOffsets(ctx, "list stable offsets of", topics, c.adm.ListCommittedOffsets)
}

func (c *Client) listedOffsets(ctx context.Context, op string, topics []string,
	list func(context.Context, ...string) (kadm.ListedOffsets, error),
) (map[string]map[int32]int64, error) {
	out := map[string]map[int32]int64{}
	if len(topics) == 0 {
		return out, nil
	}
	res := topicRes(topics[0])
	if len(topics) > 1 {
		res = fmt.Sprintf("%d topics", len(topics))
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	defer cancel()
	listed, err := list(ctx, topics...)
	if err != nil {
		// A sharded request that failed on some brokers still carries
		// the others' offsets, which are worth returning.
		se, ok := errors.AsType[*kadm.ShardErrors](err)
		if !ok || se.AllFailed {
			return nil, wrap(op, res, err)
		}
	}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset < 0 {
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	return out, nil
}
