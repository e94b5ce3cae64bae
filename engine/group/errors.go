package group

import (
	"errors"

	"github.com/moonmq/moonmq/engine/coord"
)

// Sentinel errors. net/kafka maps each to its Kafka error code; every error
// the package returns wraps exactly one of them.
var (
	// ErrCoordinatorLoadInProgress: the group's partition of
	// __consumer_offsets is still being replayed
	// (COORDINATOR_LOAD_IN_PROGRESS, retriable). The runtime's own.
	ErrCoordinatorLoadInProgress = coord.ErrLoading
	// ErrCoordinatorNotAvailable: the offsets topic is missing or failed,
	// or the coordinator is shutting down (COORDINATOR_NOT_AVAILABLE). The
	// runtime's own.
	ErrCoordinatorNotAvailable = coord.ErrUnavailable
	// ErrNotCoordinator: this node hosts no shard for the group's offsets
	// partition (NOT_COORDINATOR): the client finds the coordinator again.
	ErrNotCoordinator = coord.ErrNotCoordinator
	// ErrInvalidGroupID: the group id is empty (INVALID_GROUP_ID).
	ErrInvalidGroupID = errors.New("invalid group id")
	// ErrUnknownMemberID: the member is not part of the group
	// (UNKNOWN_MEMBER_ID).
	ErrUnknownMemberID = errors.New("unknown member id")
	// ErrMemberIDRequired: a new member must rejoin with the member id
	// carried in the response (MEMBER_ID_REQUIRED, KIP-394).
	ErrMemberIDRequired = errors.New("member id required")
	// ErrIllegalGeneration: the generation is not the group's current one
	// (ILLEGAL_GENERATION).
	ErrIllegalGeneration = errors.New("illegal generation")
	// ErrRebalanceInProgress: the group is rebalancing
	// (REBALANCE_IN_PROGRESS).
	ErrRebalanceInProgress = errors.New("rebalance in progress")
	// ErrInconsistentGroupProtocol: the member's protocol type or protocols
	// do not match the group's (INCONSISTENT_GROUP_PROTOCOL).
	ErrInconsistentGroupProtocol = errors.New("inconsistent group protocol")
	// ErrInvalidSessionTimeout: the session timeout is outside the
	// broker's bounds (INVALID_SESSION_TIMEOUT).
	ErrInvalidSessionTimeout = errors.New("invalid session timeout")
	// ErrGroupMaxSizeReached: the group has group.max.size members
	// (GROUP_MAX_SIZE_REACHED).
	ErrGroupMaxSizeReached = errors.New("group max size reached")
	// ErrFencedInstanceID: another member now owns this group.instance.id
	// (FENCED_INSTANCE_ID).
	ErrFencedInstanceID = errors.New("fenced instance id")
	// ErrGroupIDNotFound: no such group, or not of the requested kind
	// (GROUP_ID_NOT_FOUND).
	ErrGroupIDNotFound = errors.New("group id not found")
	// ErrNonEmptyGroup: the operation needs a group without members
	// (NON_EMPTY_GROUP).
	ErrNonEmptyGroup = errors.New("group is not empty")
	// ErrGroupSubscribedToTopic: offsets of a topic the group consumes
	// cannot be deleted (GROUP_SUBSCRIBED_TO_TOPIC).
	ErrGroupSubscribedToTopic = errors.New("group is subscribed to the topic")
	// ErrOffsetMetadataTooLarge: commit metadata exceeds
	// offset.metadata.max.bytes (OFFSET_METADATA_TOO_LARGE).
	ErrOffsetMetadataTooLarge = errors.New("offset metadata too large")
	// ErrInvalidCommitOffsetSize: the commit does not fit in one record
	// batch of the offsets topic (INVALID_COMMIT_OFFSET_SIZE).
	ErrInvalidCommitOffsetSize = errors.New("offset commit too large")
	// ErrGroupMetadataTooLarge: the group's assignment does not fit in one
	// record of the offsets topic (answered UNKNOWN_SERVER_ERROR, as Kafka
	// does).
	ErrGroupMetadataTooLarge = errors.New("group metadata too large to store")
	// ErrFencedMemberEpoch: the consumer-group member epoch is not the
	// current one; the member must rejoin (FENCED_MEMBER_EPOCH).
	ErrFencedMemberEpoch = errors.New("fenced member epoch")
	// ErrStaleMemberEpoch: an offset commit or fetch carries an outdated
	// member epoch (STALE_MEMBER_EPOCH).
	ErrStaleMemberEpoch = errors.New("stale member epoch")
	// ErrUnreleasedInstanceID: the instance id is still held by an active
	// consumer-group member (UNRELEASED_INSTANCE_ID).
	ErrUnreleasedInstanceID = errors.New("unreleased instance id")
	// ErrUnsupportedAssignor: the server assignor is not "uniform" or
	// "range" (UNSUPPORTED_ASSIGNOR).
	ErrUnsupportedAssignor = errors.New("unsupported assignor")
	// ErrInvalidRegex: the subscribed topic regex does not compile
	// (INVALID_REGULAR_EXPRESSION).
	ErrInvalidRegex = errors.New("invalid regular expression")
	// ErrInvalidRequest: a request field is missing or contradictory
	// (INVALID_REQUEST).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnsupportedVersion: a consumer-group member committed with an
	// OffsetCommit version below 9 (UNSUPPORTED_VERSION).
	ErrUnsupportedVersion = errors.New("unsupported request version for this group")
	// ErrUnstableOffsetCommit: a transaction has an offset of the
	// partition pending (UNSTABLE_OFFSET_COMMIT): the consumer retries
	// once the transaction ended.
	ErrUnstableOffsetCommit = errors.New("a transactional offset commit is pending")
)

// ErrUnknownTopicOrPartition: an offset commit names a topic or partition
// that does not exist (UNKNOWN_TOPIC_OR_PARTITION).
var ErrUnknownTopicOrPartition = errors.New("unknown topic or partition")
