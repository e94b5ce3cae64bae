package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/cluster/replication"
	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/engine/txn"
	"github.com/moonmq/moonmq/engine/txncoord"
)

// errorMap is the one place engine and controller errors become Kafka error
// codes. Order matters only where errors wrap one another.
var errorMap = []struct {
	err  error
	kerr *kerr.Error
}{
	{replica.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{replica.ErrPartitionOffline, kerr.KafkaStorageError},
	{replica.ErrOverCapacity, kerr.PolicyViolation},
	{replica.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{replica.ErrVerificationQueueFull, kerr.NotEnoughReplicas},
	{replica.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{replica.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{replica.ErrNotReplica, kerr.NotLeaderForPartition},
	{replica.ErrNotLeader, kerr.NotLeaderForPartition},
	{replica.ErrNotFollower, kerr.NotLeaderForPartition},
	// Replication (the ISR state machine behind a replicated leader).
	{replication.ErrNotLeader, kerr.NotLeaderForPartition},
	{replication.ErrUnknownReplica, kerr.NotLeaderForPartition}, // Kafka: a fetch from a broker the leader does not know
	{replication.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{replication.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	{replication.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{replication.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
	{replication.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
	{metadata.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{metadata.ErrTopicExists, kerr.TopicAlreadyExists},
	{metadata.ErrInvalidPartitions, kerr.InvalidPartitions},
	{metadata.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{metadata.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{metadata.ErrInvalidTopicName, kerr.InvalidTopicException},
	{metadata.ErrInvalidConfig, kerr.InvalidConfig},
	{topicconfig.ErrInvalid, kerr.InvalidConfig},
	{metadata.ErrNotController, kerr.NotController},
	{metadata.ErrClosed, kerr.NotController},
	{metadata.ErrInvalidRequest, kerr.InvalidRequest},
	{metadata.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{metadata.ErrInvalidUpdateVersion, kerr.InvalidUpdateVersion},
	{metadata.ErrIneligibleReplica, kerr.IneligibleReplica},
	{metadata.ErrBrokerNotAvailable, kerr.BrokerNotAvailable},
	{batch.ErrTooLarge, kerr.MessageTooLarge},
	{batch.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat},
	{batch.ErrInvalidRecord, kerr.InvalidRecord},
	{batch.ErrCorrupt, kerr.CorruptMessage},
	{txn.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{txn.ErrInvalidEpoch, kerr.InvalidProducerEpoch},
	{txn.ErrInvalidSequence, kerr.InvalidRecord},
	{txn.ErrInvalidTxnState, kerr.InvalidTxnState},
	{txn.ErrTxnNotVerified, kerr.InvalidTxnState},
	{txn.ErrCoordinatorFenced, kerr.TransactionCoordinatorFenced},
	// The transaction coordinator (its loading/unavailable/not-coordinator
	// errors are engine/coord's, mapped with the group coordinator's).
	{txncoord.ErrProducerFenced, kerr.ProducerFenced},
	{txncoord.ErrInvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
	{txncoord.ErrConcurrentTransactions, kerr.ConcurrentTransactions},
	{txncoord.ErrInvalidTxnState, kerr.InvalidTxnState},
	{txncoord.ErrTransactionAbortable, kerr.TransactionAbortable},
	{txncoord.ErrInvalidTransactionTimeout, kerr.InvalidTransactionTimeout},
	{txncoord.ErrTransactionalIDNotFound, kerr.TransactionalIDNotFound},
	{txncoord.ErrInvalidRequest, kerr.InvalidRequest},
	{txncoord.ErrTooManyPartitions, kerr.UnknownServerError},
	{log.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{replica.ErrInvalidListOffset, kerr.InvalidRequest},
	{log.ErrClosed, kerr.NotLeaderForPartition},
	{log.ErrCorrupt, kerr.CorruptMessage}, // damaged stored data, as Kafka answers it

	{log.ErrFailed, kerr.KafkaStorageError},
	{group.ErrCoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress},
	{group.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{group.ErrNotCoordinator, kerr.NotCoordinator},
	{group.ErrInvalidGroupID, kerr.InvalidGroupID},
	{group.ErrUnknownMemberID, kerr.UnknownMemberID},
	{group.ErrMemberIDRequired, kerr.MemberIDRequired},
	{group.ErrIllegalGeneration, kerr.IllegalGeneration},
	{group.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{group.ErrInconsistentGroupProtocol, kerr.InconsistentGroupProtocol},
	{group.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{group.ErrGroupMaxSizeReached, kerr.GroupMaxSizeReached},
	{group.ErrFencedInstanceID, kerr.FencedInstanceID},
	{group.ErrGroupIDNotFound, kerr.GroupIDNotFound},
	{group.ErrNonEmptyGroup, kerr.NonEmptyGroup},
	{group.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
	{group.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{group.ErrInvalidCommitOffsetSize, kerr.InvalidCommitOffsetSize},
	{group.ErrGroupMetadataTooLarge, kerr.UnknownServerError},
	{group.ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{group.ErrStaleMemberEpoch, kerr.StaleMemberEpoch},
	{group.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID},
	{group.ErrUnsupportedAssignor, kerr.UnsupportedAssignor},
	{group.ErrInvalidRegex, kerr.InvalidRegularExpression},
	{group.ErrInvalidRequest, kerr.InvalidRequest},
	{group.ErrUnsupportedVersion, kerr.UnsupportedVersion},
	{group.ErrUnknownTopicOrPartition, kerr.UnknownTopicOrPartition},
	{group.ErrUnstableOffsetCommit, kerr.UnstableOffsetCommit},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
}

// errCode maps an error to its Kafka code; unknown errors are logged (they
// are bugs or I/O failures the client cannot act on) and answered
// UNKNOWN_SERVER_ERROR.
func (c *conn) errCode(err error) int16 { return c.s.errCode(err, "peer", c.peer) }

// errCode is conn.errCode for work that is not a connection's (attrs say
// whose it is in the log).
func (s *Server) errCode(err error, attrs ...any) int16 {
	if err == nil {
		return 0
	}
	for _, m := range errorMap {
		if errors.Is(err, m.err) {
			return m.kerr.Code
		}
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	s.log.Error("request failed", append(attrs, "err", err)...)
	return kerr.UnknownServerError.Code
}

// errMessage is the ErrorMessage field for responses that carry one.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
