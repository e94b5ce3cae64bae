package client

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		err       error
		name      string
		explained string
		is        error
	}{
		{wrap("describe topic", topicRes("x"), kerr.UnknownTopicOrPartition),
			"UNKNOWN_TOPIC_OR_PARTITION", "topic 'x' does not exist", ErrNotFound},
		{wrap("describe group", groupRes("g"), kerr.GroupIDNotFound),
			"GROUP_ID_NOT_FOUND", "group 'g' does not exist", ErrNotFound},
		{wrap("create topic", topicRes("x"), kerr.TopicAlreadyExists),
			"TOPIC_ALREADY_EXISTS", "topic 'x' already exists", ErrExists},
		{wrap("delete group", groupRes("g"), kerr.NonEmptyGroup),
			"NON_EMPTY_GROUP", "group 'g' still has active members; stop its consumers first", ErrGroupActive},
		{wrap("read", topicRes("x"), kerr.TopicAuthorizationFailed),
			"TOPIC_AUTHORIZATION_FAILED", "not authorized to access topic 'x'", ErrNotAuthorized},
		{wrapDetail("alter configs of", topicRes("x"), kerr.InvalidConfig, "unknown key foo"),
			"INVALID_CONFIG", "a config key or value is not valid for topic 'x' (unknown key foo)", ErrInvalidArgument},
		{wrap("op", "", kerr.UnsupportedVersion),
			"UNSUPPORTED_VERSION", "the broker does not support this request version", ErrUnsupported},
		{wrap("op", "", fmt.Errorf("x: %w", syscall.ECONNREFUSED)),
			"", "connection refused: is a broker listening at that address?", ErrUnreachable},
		{wrap("op", "", context.DeadlineExceeded), "", "timed out waiting for the broker", ErrUnreachable},
		// Unlisted codes fall back to franz-go's description.
		{wrap("op", "", kerr.DuplicateSequenceNumber), "DUPLICATE_SEQUENCE_NUMBER",
			"The broker received a duplicate sequence number", nil},
		// A sharded admin failure surfaces its first Kafka code.
		{wrap("list", topicRes("y"), &kadm.ShardErrors{Errs: []kadm.ShardError{{Err: kerr.UnknownTopicOrPartition}}}),
			"", "topic 'y' does not exist", ErrNotFound},
		// Bare kerr errors are explained too.
		{kerr.OffsetOutOfRange, "OFFSET_OUT_OF_RANGE",
			"the offset is outside the partition's log (before its start or after its end)", nil},
	} {
		t.Run(tc.explained, func(t *testing.T) {
			if tc.name != "" {
				require.Equal(t, tc.name, ErrorName(tc.err))
			}
			require.Equal(t, tc.explained, Explain(tc.err))
			if tc.is != nil {
				require.ErrorIs(t, tc.err, tc.is)
			}
		})
	}
	require.Equal(t, "", Explain(nil))
	require.Equal(t, "", ErrorName(nil))
	require.Equal(t, "plain", Explain(errors.New("plain")))
	require.NoError(t, wrap("op", "", nil))

	// Error() carries op, resource, Kafka name and explanation.
	err := wrap("describe topic", topicRes("x"), kerr.UnknownTopicOrPartition)
	require.Equal(t, "describe topic topic 'x': UNKNOWN_TOPIC_OR_PARTITION: topic 'x' does not exist", err.Error())
	// Wrapping twice keeps the innermost context.
	require.Same(t, err, wrap("other", "", fmt.Errorf("ctx: %w", err)))
	// Sentinel classes do not overlap.
	require.NotErrorIs(t, err, ErrExists)
	require.NotErrorIs(t, err, ErrUnreachable)
}
