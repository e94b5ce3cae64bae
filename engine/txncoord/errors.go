package txncoord

import (
	"errors"

	"github.com/moonmq/moonmq/engine/coord"
)

// Errors of the coordinator's operations, mapped by net/kafka to the Kafka
// codes of the same names. The runtime's own (loading, unavailable, not the
// coordinator) are engine/coord's.
var (
	// ErrProducerFenced: a newer producer (epoch) owns the transactional
	// id (PRODUCER_FENCED; INVALID_PRODUCER_EPOCH to old request versions).
	ErrProducerFenced = errors.New("producer fenced by a newer epoch")
	// ErrInvalidProducerIDMapping: the producer id is not the one the
	// transactional id has (INVALID_PRODUCER_ID_MAPPING).
	ErrInvalidProducerIDMapping = errors.New("producer id does not match the transactional id")
	// ErrConcurrentTransactions: the previous transaction is still being
	// completed (CONCURRENT_TRANSACTIONS): the client retries.
	ErrConcurrentTransactions = errors.New("a previous transaction is still completing")
	// ErrInvalidTxnState: the request does not fit the transaction's
	// state (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("invalid transaction state")
	// ErrTransactionAbortable: a verified partition is not in the
	// transaction (TRANSACTION_ABORTABLE).
	ErrTransactionAbortable = errors.New("partition is not in the transaction")
	// ErrInvalidTransactionTimeout: a timeout above
	// transaction.max.timeout.ms, or not positive
	// (INVALID_TRANSACTION_TIMEOUT).
	ErrInvalidTransactionTimeout = errors.New("invalid transaction timeout")
	// ErrTransactionalIDNotFound: DescribeTransactions of an id this
	// coordinator does not know (TRANSACTIONAL_ID_NOT_FOUND).
	ErrTransactionalIDNotFound = errors.New("transactional id not found")
	// ErrInvalidRequest: a malformed request (INVALID_REQUEST).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrTooManyPartitions: a transaction would hold more partitions than
	// the coordinator keeps (UNKNOWN_SERVER_ERROR, as Kafka answers a
	// record too large for its log).
	ErrTooManyPartitions = errors.New("too many partitions in one transaction")

	// Re-exported for callers that map one set.
	ErrLoading        = coord.ErrLoading
	ErrUnavailable    = coord.ErrUnavailable
	ErrNotCoordinator = coord.ErrNotCoordinator

	// errNeedProducerID: the operation needs a fresh producer id it was
	// not given; the Coordinator allocates one outside the shard lock and
	// runs it again.
	errNeedProducerID = errors.New("txncoord: a producer id is needed")
)
