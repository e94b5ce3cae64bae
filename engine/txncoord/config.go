package txncoord

import (
	"fmt"
	"log/slog"
	"time"
)

// Config tunes the transaction coordinator. Zero fields take the defaults
// EnsureDefaults gives, Kafka's where Kafka has one.
type Config struct {
	// Partitions of __transaction_state when this node creates it
	// (transaction.state.log.num.partitions, 50).
	Partitions int32
	// SegmentBytes is the segment.bytes __transaction_state is created
	// with (transaction.state.log.segment.bytes, DefaultSegmentBytes): the
	// cleaner never compacts a partition's active segment, so this bounds
	// what a replay reads beyond the live transactional ids.
	SegmentBytes int
	// TransactionMaxTimeout bounds the timeout a producer may ask for
	// (transaction.max.timeout.ms, 15 minutes).
	TransactionMaxTimeout time.Duration
	// TransactionalIDExpiration forgets a transactional id idle this long
	// (transactional.id.expiration.ms, 7 days).
	TransactionalIDExpiration time.Duration
	// RemoveExpiredInterval is how often expired ids are removed
	// (transaction.remove.expired.transaction.cleanup.interval.ms, 1 hour).
	RemoveExpiredInterval time.Duration
	// TransactionVersion is the cluster's transaction version (KIP-890):
	// 2 bumps the epoch at every transaction's end; 0 and 1 do not. It
	// also chooses the record value version (1 from version 1 on).
	TransactionVersion int16
	// MaxTxnPartitions bounds the partitions of one transaction (a record
	// must stay within MaxRecordBytes).
	MaxTxnPartitions int
	// MaxRecordBytes bounds one batch the coordinator appends.
	MaxRecordBytes int
	// MarkerRetryBackoff is the first wait before a marker is sent again;
	// it doubles up to MaxMarkerRetryBackoff.
	MarkerRetryBackoff, MaxMarkerRetryBackoff time.Duration
	// TickInterval and PartitionRecheckInterval drive the runtime.
	TickInterval, PartitionRecheckInterval time.Duration
	// Now is the clock of every timer.
	Now    func() time.Time
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.Partitions == 0 {
		c.Partitions = 50
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.TransactionMaxTimeout == 0 {
		c.TransactionMaxTimeout = 15 * time.Minute
	}
	if c.TransactionalIDExpiration == 0 {
		c.TransactionalIDExpiration = 7 * 24 * time.Hour
	}
	if c.RemoveExpiredInterval == 0 {
		c.RemoveExpiredInterval = time.Hour
	}
	if c.MaxTxnPartitions == 0 {
		c.MaxTxnPartitions = 10000
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = 1000012
	}
	if c.MarkerRetryBackoff == 0 {
		c.MarkerRetryBackoff = 100 * time.Millisecond
	}
	if c.MaxMarkerRetryBackoff == 0 {
		c.MaxMarkerRetryBackoff = 5 * time.Second
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.PartitionRecheckInterval == 0 {
		c.PartitionRecheckInterval = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate checks a defaulted Config.
func (c *Config) Validate() error {
	switch {
	case c.Partitions < 1:
		return fmt.Errorf("txncoord: %d transaction state partitions: at least 1", c.Partitions)
	case c.SegmentBytes < 0:
		// The topic's own rules (segment.bytes' minimum) are checked by
		// whoever creates it: this package knows no topic configs.
		return fmt.Errorf("txncoord: transaction state segment bytes %d: not negative", c.SegmentBytes)
	case c.TransactionMaxTimeout <= 0 || c.TransactionMaxTimeout > time.Duration(1<<31-1)*time.Millisecond:
		return fmt.Errorf("txncoord: transaction max timeout %v: between 1ms and 2^31-1 ms", c.TransactionMaxTimeout)
	case c.TransactionVersion < 0 || c.TransactionVersion > 2:
		return fmt.Errorf("txncoord: transaction version %d: 0, 1 or 2", c.TransactionVersion)
	case c.TransactionalIDExpiration <= 0 || c.RemoveExpiredInterval <= 0:
		return fmt.Errorf("txncoord: expiration %v every %v: both positive", c.TransactionalIDExpiration, c.RemoveExpiredInterval)
	case c.MaxTxnPartitions < 1:
		return fmt.Errorf("txncoord: at most %d partitions per transaction: at least 1", c.MaxTxnPartitions)
	}
	return nil
}
