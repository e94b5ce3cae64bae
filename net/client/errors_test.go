package client

import (
	"context"
	"errors"
	"fmt"
	"net"
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
			"INVALID_CONFIG", "unknown key foo", ErrInvalidArgument},
		{wrap("alter configs of", topicRes("x"), kerr.InvalidConfig),
			"INVALID_CONFIG", "a config key or value is not valid for topic 'x'", ErrInvalidArgument},
		{wrap("op", "", kerr.UnsupportedVersion),
			"UNSUPPORTED_VERSION", "the broker does not support this request version", ErrUnsupported},
		{wrap("op", "", fmt.Errorf("x: %w", syscall.ECONNREFUSED)),
			"", "connection refused: is a broker listening at that address?", ErrUnreachable},
		{wrap("op", "", context.DeadlineExceeded), "", "timed out waiting for the broker", ErrUnreachable},
		{&Error{Op: "dial", Resource: "h:99999", Err: fmt.Errorf("%w: unable to dial: %w", ErrUnreachable, &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "invalid port", Addr: "99999"}})},
			"", "invalid port 99999", ErrUnreachable},
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

	// Error() is one sentence: the explanation alone when it names the
	// resource, else what could not be done and why.
	err := wrap("describe topic", topicRes("x"), kerr.UnknownTopicOrPartition)
	require.Equal(t, "topic 'x' does not exist", err.Error())
	// Wrapping twice keeps the innermost context.
	require.Same(t, err, wrap("other", "", fmt.Errorf("ctx: %w", err)))
	// Sentinel classes do not overlap.
	require.NotErrorIs(t, err, ErrExists)
	require.NotErrorIs(t, err, ErrUnreachable)
}

// TestErrorSentences pins Error(): one sentence per failure, without the
// operation when the explanation already names what failed, without the
// Kafka code name, and with the broker's message only where it is the
// specific reason (never where it repeats the explanation).
func TestErrorSentences(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{wrapDetail("create topic", topicRes("orders"), kerr.TopicAlreadyExists, `topic already exists: "orders"`),
			"topic 'orders' already exists"},
		{wrapDetail("drop topic", topicRes("nope"), kerr.UnknownTopicOrPartition, `unknown topic: "nope"`),
			"topic 'nope' does not exist"},
		{wrap("read", topicRes("nope"), kerr.UnknownTopicOrPartition), "topic 'nope' does not exist"},
		{wrap("read", partRes("orders", 5), kerr.UnknownTopicOrPartition), "partition 5 of topic 'orders' does not exist"},
		// Internal topics: the generic code would blame the name's characters.
		{wrapDetail("drop topic", topicRes("__consumer_offsets"), kerr.InvalidTopicException, "internal topic __consumer_offsets cannot be deleted"),
			"__consumer_offsets is an internal topic and cannot be dropped"},
		{wrap("produce to", topicRes("__consumer_offsets"), kerr.InvalidTopicException),
			"__consumer_offsets is an internal topic and cannot be written to"},
		{wrapDetail("alter configs of", topicRes("__transaction_state"), kerr.InvalidTopicException, "fixed configs"),
			"__transaction_state is an internal topic: its configs cannot be changed"},
		{wrapDetail("create topic", topicRes("__consumer_offsets"), kerr.InvalidRequest, "creation of internal topic __consumer_offsets is prohibited"),
			"__consumer_offsets is an internal topic and cannot be created by clients: the broker creates it itself"},
		{wrap("add partitions to", topicRes("__consumer_offsets"), kerr.InvalidTopicException),
			"__consumer_offsets is an internal topic and cannot get more partitions"},
		// A generic code with the broker's reason: the reason, once.
		{wrapDetail("create topic", topicRes("bad name"), kerr.InvalidTopicException, `invalid topic name: "bad name" contains ' '`),
			`cannot create topic 'bad name': invalid topic name: "bad name" contains ' '`},
		{wrap("create topic", topicRes("a b"), kerr.InvalidTopicException),
			"cannot create topic 'a b': the topic name is not valid: use up to 249 letters, digits, '.', '_' or '-', and not '.' or '..'"},
		{wrapDetail("alter configs of", topicRes("orders"), kerr.InvalidConfig, `invalid topic config: unknown key "foo"`),
			`cannot alter configs of topic 'orders': invalid topic config: unknown key "foo"`},
		{wrapDetail("op", "", kerr.UnknownServerError, "disk on fire"),
			"cannot op: the broker failed unexpectedly; see its log (disk on fire)"},
		// A sentence written here that names the resource is the message.
		{wrapDetail("reset group", groupRes("g"), kerr.GroupIDNotFound, "group 'g' has no committed offsets; name a TOPIC to create them"),
			"group 'g' has no committed offsets; name a TOPIC to create them"},
		// A group working on a topic: each code speaks of its own resource.
		{wrap("commit offset for", groupRes("g")+" on "+partRes("t", 5), kerr.UnknownTopicOrPartition),
			"partition 5 of topic 't' does not exist"},
		{wrap("commit offset for", groupRes("g")+" on "+partRes("t", 0), kerr.NonEmptyGroup),
			"group 'g' still has active members; stop its consumers first"},
		// Transport failures say what could not be done.
		{wrap("describe topic", topicRes("x"), context.DeadlineExceeded),
			"cannot describe topic 'x': timed out waiting for the broker"},
	} {
		require.Equal(t, tc.want, tc.err.Error())
	}
}
