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
	maxTimeout      time.Duration
	idExpiration    time.Duration
	expiredCheck    time.Duration
}

func addTxnFlags(fs *flag.FlagSet) *txnFlags {
	t := &txnFlags{}
	fs.IntVar(&t.statePartitions, "transaction-state-partitions", 50,
		"partitions of __transaction_state when it is created (transaction.state.log.num.partitions)")
	fs.DurationVar(&t.maxTimeout, "transaction-max-timeout", 15*time.Minute,
		"largest transaction timeout a producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&t.idExpiration, "transactional-id-expiration", 7*24*time.Hour,
		"a transactional id idle this long is forgotten (transactional.id.expiration.ms)")
	fs.DurationVar(&t.expiredCheck, "transaction-remove-expired-interval", time.Hour,
		"how often expired transactional ids are removed (transaction.remove.expired.transaction.cleanup.interval.ms)")
	return t
}

// config is the coordinator's configuration; serve's validation and its
// start both use it.
func (t *txnFlags) config(logger *slog.Logger) txncoord.Config {
	return txncoord.Config{
		Partitions: int32(t.statePartitions), TransactionMaxTimeout: t.maxTimeout,
		TransactionalIDExpiration: t.idExpiration, RemoveExpiredInterval: t.expiredCheck,
		Logger: logger,
	}
}
