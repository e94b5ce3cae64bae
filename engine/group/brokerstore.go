package group

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/txn"
)

// DefaultOffsetsTopicSegmentBytes is MoonMQ's offsets.topic.segment.bytes
// default, 4 MiB where Kafka's is 100 MiB: the cleaner never compacts a
// partition's active segment, so with 50 partitions Kafka's default leaves
// up to 5 GiB of history uncompacted for the coordinator to replay at start
// (Kafka's own documentation advises keeping it small for faster
// compaction and loads); 4 MiB bounds that tail to 200 MiB.
const DefaultOffsetsTopicSegmentBytes = 4 << 20

// OffsetsTopicConfigs are the topic configs of __consumer_offsets with
// segmentBytes as its segment.bytes (offsets.topic.segment.bytes; 0:
// DefaultOffsetsTopicSegmentBytes), as Kafka's groupMetadataTopicConfigs
// sets them: compacted, so the log holds about the latest record of every
// key (the active segment, which the cleaner never touches, aside) and a
// replay reads that much, not every commit ever made. retention.ms=-1 dates
// from before compaction; compact alone turns retention off, and dropping
// it would only make the start-up repair of every existing node log a
// change.
func OffsetsTopicConfigs(segmentBytes int) map[string]string {
	if segmentBytes == 0 {
		segmentBytes = DefaultOffsetsTopicSegmentBytes
	}
	return map[string]string{
		"cleanup.policy": "compact",
		"retention.ms":   "-1",
		"segment.bytes":  strconv.Itoa(segmentBytes),
	}
}

// BrokerStorage is the Storage of a real node: the broker's partitions of
// __consumer_offsets. The topic is created and described through the two
// functions, which main wires to the metadata controller (engine does not
// import cluster). The transaction coordinator's __transaction_state is
// stored the same way: Topic and Configs name another internal topic.
type BrokerStorage struct {
	Broker *replica.Manager
	// Topic is the internal topic stored (default OffsetsTopic) and
	// Configs what it is created with (default OffsetsTopicConfigs(0)).
	Topic   string
	Configs map[string]string
	// PartitionCount returns the offsets topic's partition count, 0 when
	// the topic does not exist.
	PartitionCount func() int32
	// CreateTopic creates the offsets topic with n partitions and configs;
	// an already existing topic is not an error.
	CreateTopic func(ctx context.Context, n int32, configs map[string]string) error
}

// Partitions implements Storage.
func (s *BrokerStorage) Partitions() int32 { return s.PartitionCount() }

// Create implements Storage.
func (s *BrokerStorage) Create(ctx context.Context, n int32) (int32, error) {
	configs := s.Configs
	if configs == nil {
		configs = OffsetsTopicConfigs(0)
	}
	if err := s.CreateTopic(ctx, n, configs); err != nil {
		return 0, err
	}
	if got := s.Partitions(); got > 0 {
		return got, nil
	}
	return 0, fmt.Errorf("%s was created but has no partitions", s.topic())
}

func (s *BrokerStorage) topic() string {
	if s.Topic == "" {
		return OffsetsTopic
	}
	return s.Topic
}

func (s *BrokerStorage) partition(p int32) (*replica.Partition, error) {
	return s.Broker.Partition(replica.TopicPartition{Topic: s.topic(), Partition: p})
}

// LeaderEpoch is the leader epoch partition p is led in here (-1: not
// hosted): the transaction coordinator's epoch.
func (s *BrokerStorage) LeaderEpoch(p int32) int32 {
	part, err := s.partition(p)
	if err != nil {
		return -1
	}
	return part.LeaderEpoch()
}

// Append implements Storage.
func (s *BrokerStorage) Append(p int32, records []byte) (int64, error) {
	return s.append(p, records, false)
}

// AppendDeferred implements coord.DeferredStorage: Append starting no fsync
// round (replica.Partition.AppendDeferred).
func (s *BrokerStorage) AppendDeferred(p int32, records []byte) (int64, error) {
	return s.append(p, records, true)
}

func (s *BrokerStorage) append(p int32, records []byte, deferred bool) (int64, error) {
	h, err := batch.ParseHeader(records)
	if err != nil {
		return 0, err
	}
	part, err := s.partition(p)
	if err != nil {
		return 0, err
	}
	appendFn := part.Append // stamped with the epoch the replica leads in
	if deferred {
		appendFn = part.AppendDeferred
	}
	res, err := appendFn(records)
	if err != nil {
		return 0, err
	}
	return res.BaseOffset + int64(h.LastOffsetDelta), nil
}

// WaitDurable implements Storage.
func (s *BrokerStorage) WaitDurable(ctx context.Context, p int32, offset int64) error {
	part, err := s.partition(p)
	if err != nil {
		return err
	}
	// On a cluster the write must be on the ISR (min.insync.replicas
	// disks), as an acks=all produce: a committed offset survives the loss
	// of any minority of nodes. Alone, that is the fsync.
	return part.WaitOffsetReplicated(ctx, offset)
}

// Read implements Storage: up to the log end, for the coordinator is the
// partition's only writer and waits for durability before it answers.
func (s *BrokerStorage) Read(p int32, offset int64, maxBytes int) ([]byte, error) {
	part, err := s.partition(p)
	if err != nil {
		return nil, err
	}
	return part.ReadToEnd(offset, maxBytes)
}

// Bounds implements Storage.
func (s *BrokerStorage) Bounds(p int32) (start, end int64, err error) {
	part, err := s.partition(p)
	if err != nil {
		return 0, 0, err
	}
	start, end = part.Bounds()
	return start, end, nil
}

// Damaged implements Storage: the end of the damaged range of the log that
// holds offset.
func (s *BrokerStorage) Damaged(p int32, offset int64) (int64, bool) {
	part, err := s.partition(p)
	if err != nil {
		return 0, false
	}
	return part.DamagedEnd(offset)
}

// Generation implements Storage.
func (s *BrokerStorage) Generation(p int32) (uint64, error) {
	part, err := s.partition(p)
	if err != nil {
		return 0, err
	}
	return part.Generation(), nil
}

// AppendTxn implements coord.TxnStorage: a transactional offset commit,
// appended in the producer's transaction with the verification guard the
// partition handed out (StartTxnWrite; nil when none was needed).
func (s *BrokerStorage) AppendTxn(p int32, records []byte, guard any) (int64, error) {
	h, err := batch.ParseHeader(records)
	if err != nil {
		return 0, err
	}
	part, err := s.partition(p)
	if err != nil {
		return 0, err
	}
	g, _ := guard.(*txn.Verification)
	res, err := part.AppendCoordinator(records, g)
	if errors.Is(err, txn.ErrTxnNotVerified) || errors.Is(err, txn.ErrInvalidEpoch) || errors.Is(err, txn.ErrInvalidTxnState) {
		return 0, fmt.Errorf("%w: %w", coord.ErrRefused, err) // the producer state refused it: nothing written
	}
	if err != nil {
		return 0, err
	}
	return res.BaseOffset + int64(h.LastOffsetDelta), nil
}

// WriteMarker implements coord.TxnStorage: the end-transaction marker of
// a transaction that committed offsets to partition p.
func (s *BrokerStorage) WriteMarker(p int32, m coord.Marker) (int64, error) {
	part, err := s.partition(p)
	if err != nil {
		return 0, err
	}
	res, err := part.WriteMarker(replica.MarkerParams{ProducerID: m.ProducerID, Epoch: m.Epoch, Commit: m.Commit,
		CoordinatorEpoch: m.CoordinatorEpoch, TV2: m.TransactionVersion >= 2})
	if err != nil {
		return 0, err
	}
	return res.BaseOffset, nil
}

// StartTxnWrite hands out the verification guard for a transactional
// offset commit of producer (pid, epoch) to partition p, if the commit
// would open the producer's transaction there (see
// replica.Partition.StartTxnWrite).
func (s *BrokerStorage) StartTxnWrite(p int32, pid int64, epoch int16) (guard any, needed bool, err error) {
	part, err := s.partition(p)
	if err != nil {
		return nil, false, err
	}
	g, needed, err := part.StartTxnWrite(pid, epoch)
	if g == nil {
		return nil, needed, err // a nil *txn.Verification in an interface would not be nil
	}
	return g, needed, err
}
