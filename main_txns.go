package main

import (
	"flag"
	"log/slog"
	"time"

	"github.com/moonmq/moonmq/engine/txncoord"
)

// txnFlags are the transaction coordinator's settings of `moonmq serve`,
// named after Kafka's broker configs.
type txnFlags struct {
	statePartitions int
	stateSegment    int
	maxTimeout      time.Duration
	idExpiration    time.Duration
	expiredCheck    time.Duration
	version         int
}

func addTxnFlags(fs *flag.FlagSet) *txnFlags {
	t := &txnFlags{}
	fs.IntVar(&t.statePartitions, "transaction-state-partitions", 50,
		"partitions of __transaction_state when it is created (transaction.state.log.num.partitions)")
	fs.IntVar(&t.stateSegment, "transaction-state-segment-bytes", txncoord.DefaultSegmentBytes,
		"segment.bytes of __transaction_state when it is created (transaction.state.log.segment.bytes); compaction never cleans a partition's last segment")
	fs.DurationVar(&t.maxTimeout, "transaction-max-timeout", 15*time.Minute,
		"largest transaction timeout a producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&t.idExpiration, "transactional-id-expiration", 7*24*time.Hour,
		"a transactional id idle this long is forgotten (transactional.id.expiration.ms)")
	fs.DurationVar(&t.expiredCheck, "transaction-remove-expired-interval", time.Hour,
		"how often expired transactional ids are removed (transaction.remove.expired.transaction.cleanup.interval.ms)")
	fs.IntVar(&t.version, "transaction-version", 2,
		"the transaction protocol offered (the transaction.version feature): 2 is KIP-890 part 2 (the epoch bumps at every transaction's end, partitions are added implicitly); 0 or 1 the earlier protocol")
	return t
}

// config is the coordinator's configuration; serve's validation and its
// start both use it.
func (t *txnFlags) config(logger *slog.Logger) txncoord.Config {
	version := int16(-1) // refused by Validate, naming the flag's value
	if t.version >= 0 && t.version <= 2 {
		version = int16(t.version)
	}
	return txncoord.Config{
		Partitions: int32(t.statePartitions), SegmentBytes: t.stateSegment, TransactionMaxTimeout: t.maxTimeout,
		TransactionalIDExpiration: t.idExpiration, RemoveExpiredInterval: t.expiredCheck,
		TransactionVersion: version, Logger: logger,
	}
}
