package group

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/moonmq/moonmq/engine/topicconfig"
)

// Config holds the broker-side group settings, named after Kafka's.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound a classic member's
	// session timeout (group.min/max.session.timeout.ms).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// classic group waits for more members (group.initial.rebalance.delay.ms).
	InitialRebalanceDelay time.Duration
	// MaxSize bounds the members of a group (group.max.size).
	MaxSize int
	// ConsumerSessionTimeout and ConsumerHeartbeatInterval apply to KIP-848
	// consumer groups (group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms); the broker, not the client,
	// chooses them.
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	// OffsetsRetention is how long the offsets of an empty group (or of a
	// topic a group no longer consumes) are kept (offsets.retention.minutes).
	OffsetsRetention time.Duration
	// RetentionCheckInterval is how often expired offsets are removed
	// (offsets.retention.check.interval.ms).
	RetentionCheckInterval time.Duration
	// MaxMetadataBytes bounds an offset commit's metadata string
	// (offset.metadata.max.bytes).
	MaxMetadataBytes int
	// MaxRecordBytes bounds one record batch written to the offsets topic:
	// a commit or a group's metadata larger than this is refused. It must
	// not exceed the topic's max.message.bytes.
	MaxRecordBytes int
	// OffsetsTopicPartitions is the partition count used when the
	// coordinator creates __consumer_offsets (offsets.topic.num.partitions).
	// An existing topic keeps its count.
	OffsetsTopicPartitions int32
	// OffsetsTopicSegmentBytes is the segment.bytes __consumer_offsets is
	// created with, and put back at start (offsets.topic.segment.bytes;
	// 0: DefaultOffsetsTopicSegmentBytes). The cleaner never compacts a
	// partition's active segment, so this bounds what compaction leaves
	// uncleaned, and with it a partition's replay.
	OffsetsTopicSegmentBytes int
	// TickInterval is how often the driver goroutine feeds the clock to
	// the state machines (session and rebalance timeouts resolve at this
	// granularity).
	TickInterval time.Duration
	// PartitionRecheckInterval is how often the driver looks for offsets
	// partitions to replay: ones that could not be replayed, and ones whose
	// log was rewritten (healed) under the coordinator.
	PartitionRecheckInterval time.Duration

	// Now is the clock (time.Now by default).
	Now func() time.Time
	// Owns says whether this node coordinates the groups of offsets
	// partition p: on a cluster, whether it leads p (the node then calls
	// LoadPartition and UnloadPartition as leadership moves). Nil: every
	// partition, as on a single node.
	Owns func(p int32) bool
	// NewID returns a fresh unique string for member ids (a random UUID by
	// default); tests make it deterministic.
	NewID  func() string
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with Kafka's defaults.
func (c *Config) EnsureDefaults() {
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = 3 * time.Second
	}
	if c.MaxSize == 0 {
		c.MaxSize = math.MaxInt32
	}
	if c.ConsumerSessionTimeout == 0 {
		c.ConsumerSessionTimeout = 45 * time.Second
	}
	if c.ConsumerHeartbeatInterval == 0 {
		c.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = 10 * time.Minute
	}
	if c.MaxMetadataBytes == 0 {
		c.MaxMetadataBytes = 4096
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = 1000012 // Kafka's message.max.bytes default, below the topic limit
	}
	if c.OffsetsTopicPartitions == 0 {
		c.OffsetsTopicPartitions = 50
	}
	if c.OffsetsTopicSegmentBytes == 0 {
		c.OffsetsTopicSegmentBytes = DefaultOffsetsTopicSegmentBytes
	}
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.PartitionRecheckInterval == 0 {
		c.PartitionRecheckInterval = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = randomUUID
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a misconfiguration.
func (c *Config) Validate() error {
	var errs []error
	if c.MinSessionTimeout < 0 || c.MaxSessionTimeout < c.MinSessionTimeout {
		errs = append(errs, fmt.Errorf("group session timeouts: min %v must be >= 0 and <= max %v", c.MinSessionTimeout, c.MaxSessionTimeout))
	}
	if c.InitialRebalanceDelay < 0 {
		errs = append(errs, fmt.Errorf("group initial rebalance delay %v must be >= 0", c.InitialRebalanceDelay))
	}
	if c.MaxSize < 1 {
		errs = append(errs, fmt.Errorf("group max size %d must be at least 1", c.MaxSize))
	}
	if c.ConsumerHeartbeatInterval <= 0 || c.ConsumerSessionTimeout <= c.ConsumerHeartbeatInterval {
		errs = append(errs, fmt.Errorf("consumer group heartbeat interval %v must be > 0 and below the session timeout %v",
			c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout))
	}
	if c.OffsetsRetention <= 0 {
		errs = append(errs, fmt.Errorf("offsets retention %v must be positive", c.OffsetsRetention))
	}
	if c.RetentionCheckInterval <= 0 || c.TickInterval <= 0 || c.PartitionRecheckInterval <= 0 {
		errs = append(errs, errors.New("group check intervals must be positive"))
	}
	if c.MaxMetadataBytes < 0 || c.MaxRecordBytes < 1024 {
		errs = append(errs, fmt.Errorf("offset metadata limit %d must be >= 0 and record limit %d >= 1024", c.MaxMetadataBytes, c.MaxRecordBytes))
	}
	if c.OffsetsTopicPartitions < 1 || c.OffsetsTopicPartitions > 1000 {
		errs = append(errs, fmt.Errorf("offsets topic partitions %d must be between 1 and 1000", c.OffsetsTopicPartitions))
	}
	// The topic's own segment.bytes rule, so a value the topic would
	// refuse at creation is refused at start.
	if err := topicconfig.ValidateOne(topicconfig.SegmentBytes, strconv.Itoa(c.OffsetsTopicSegmentBytes)); err != nil {
		errs = append(errs, fmt.Errorf("offsets topic segment bytes: %w", err))
	}
	return errors.Join(errs...)
}

// randomUUID returns a random (version 4) UUID in its canonical text form,
// as Kafka uses for member ids.
func randomUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (it panics on broken systems)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}
