package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors. Every error returned by this package that falls in one of
// these classes matches it with errors.Is, so callers can branch without
// knowing Kafka error codes. The underlying *kerr.Error, when there is one,
// is also reachable with errors.Is / errors.As.
var (
	// ErrUnreachable: no broker answered (connection refused, timeout, not a
	// Kafka endpoint).
	ErrUnreachable = errors.New("broker unreachable")
	// ErrNotFound: the topic, partition, group or user does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the topic already exists.
	ErrExists = errors.New("already exists")
	// ErrInvalidArgument: the request was rejected before or by the broker
	// because an argument is not valid (bad name, partition count, config).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrGroupActive: the group has live members, so its offsets cannot be
	// reset and it cannot be deleted.
	ErrGroupActive = errors.New("group has active members")
	// ErrNotAuthorized: the broker denied the operation.
	ErrNotAuthorized = errors.New("not authorized")
	// ErrUnsupported: the broker does not implement the request.
	ErrUnsupported = errors.New("not supported by the broker")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client closed")
)

// Error is the error type returned by Client methods for failures reported
// by a broker (a Kafka error code) or the transport. It carries what was
// being done and to what, so that Explain can produce a sentence a person
// understands without the caller re-deriving context.
type Error struct {
	// Op is the operation, e.g. "create topic".
	Op string
	// Resource names what the operation targeted, already quoted for
	// display, e.g. "topic 'orders'" or "group 'billing'". May be empty.
	Resource string
	// Kafka is the Kafka error code, nil for transport or local errors.
	Kafka *kerr.Error
	// Detail is the broker's free-form error message, if it sent one.
	Detail string
	// Err is the underlying error (the *kerr.Error itself for Kafka codes).
	Err error
}

// Error renders one sentence a person can act on. When the explanation
// names what failed ("topic 'orders' already exists"), it is the whole
// message: the operation adds nothing, and scripts already point at the
// statement. Otherwise it says what could not be done and why ("cannot
// describe topic 'orders': timed out waiting for the broker"). The Kafka
// error name is left out (ErrorName has it); the broker's own message is
// used when it is the specific reason, and dropped when it only repeats
// the explanation.
func (e *Error) Error() string {
	s, named := e.sentence()
	if named {
		return s
	}
	var b strings.Builder
	b.WriteString("cannot ")
	op := e.Op
	if kind, _, ok := strings.Cut(e.Resource, " "); ok {
		// "create topic" + "topic 'x'" reads "create topic 'x'".
		op = strings.TrimSuffix(op, " "+kind)
	}
	b.WriteString(op)
	if e.Resource != "" {
		b.WriteString(" ")
		b.WriteString(e.Resource)
	}
	b.WriteString(": ")
	b.WriteString(s)
	return b.String()
}

// Unwrap exposes the underlying error (for errors.Is(err, kerr.X)).
func (e *Error) Unwrap() error { return e.Err }

// Is maps the error onto this package's sentinel classes.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnreachable:
		return e.Kafka == nil && isNetworkError(e.Err)
	case ErrNotFound:
		return e.Kafka == kerr.UnknownTopicOrPartition || e.Kafka == kerr.GroupIDNotFound ||
			e.Kafka == kerr.UnknownTopicID || e.Kafka == kerr.ResourceNotFound ||
			e.Kafka == kerr.TransactionalIDNotFound
	case ErrExists:
		return e.Kafka == kerr.TopicAlreadyExists
	case ErrInvalidArgument:
		switch e.Kafka {
		case kerr.InvalidTopicException, kerr.InvalidPartitions, kerr.InvalidReplicationFactor,
			kerr.InvalidReplicaAssignment, kerr.InvalidConfig, kerr.InvalidRequest,
			kerr.PolicyViolation, kerr.OffsetOutOfRange, kerr.InvalidGroupID:
			return true
		}
		return false
	case ErrGroupActive:
		return e.Kafka == kerr.NonEmptyGroup
	case ErrNotAuthorized:
		switch e.Kafka {
		case kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed,
			kerr.ClusterAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed,
			kerr.SaslAuthenticationFailed:
			return true
		}
		return false
	case ErrUnsupported:
		return e.Kafka == kerr.UnsupportedVersion || (e.Kafka == nil && isUnsupportedRequest(e.Err))
	}
	return false
}

// explain returns the plain-language sentence for the error, without the
// operation prefix or the Kafka name.
func (e *Error) explain() string {
	s, _ := e.sentence()
	return s
}

// sentence returns the explanation and whether it names the error's
// resource (so it reads on its own).
func (e *Error) sentence() (string, bool) {
	if e.Kafka == nil {
		s := explainTransport(e.Err)
		if e.Detail != "" && !strings.Contains(s, e.Detail) {
			s += " (" + e.Detail + ")"
		}
		return s, false
	}
	if s, ok := internalTopicSentence(e); ok {
		return s, true
	}
	detail := strings.TrimSpace(e.Detail)
	// A detail that names the resource the way this package does was
	// written here for a person (ResetGroup's "has no committed offsets"):
	// it is the whole story.
	if detail != "" && e.Resource != "" && strings.Contains(detail, e.Resource) {
		return detail, true
	}
	s := explainCode(e.Kafka, e.Resource)
	switch {
	case detail == "" || completeExplanation[e.Kafka] || sameWords(detail, s):
		// Nothing to add: "unknown topic: \"x\"" only repeats "topic 'x'
		// does not exist".
	case detailIsTheReason[e.Kafka]:
		s = detail
	default:
		s += " (" + detail + ")"
	}
	return s, namesResource(s, e.Resource)
}

// namesResource reports whether s names resource, or one of its parts
// ("group 'g' on topic 't'").
func namesResource(s, resource string) bool {
	for _, part := range strings.Split(resource, " on ") {
		if part != "" && strings.Contains(s, part) {
			return true
		}
	}
	return false
}

// completeExplanation lists the codes whose explanation says everything:
// the broker's message can only repeat it.
var completeExplanation = map[*kerr.Error]bool{
	kerr.UnknownTopicOrPartition: true, kerr.UnknownTopicID: true, kerr.TopicAlreadyExists: true,
	kerr.GroupIDNotFound: true, kerr.ResourceNotFound: true, kerr.TransactionalIDNotFound: true,
}

// detailIsTheReason lists the codes that stand for a whole class of
// rejections ("something about the request is not valid"): when the broker
// says which, its message replaces the generic explanation, which could
// otherwise blame the wrong thing (a topic name's characters, for an
// internal topic that may not be dropped).
var detailIsTheReason = map[*kerr.Error]bool{
	kerr.InvalidTopicException: true, kerr.InvalidRequest: true, kerr.PolicyViolation: true,
	kerr.InvalidConfig: true, kerr.InvalidReplicationFactor: true, kerr.InvalidPartitions: true,
	kerr.InvalidReplicaAssignment: true,
}

// sameWords reports whether every word of detail already appears in s, so
// showing it would only repeat s.
func sameWords(detail, s string) bool {
	have := map[string]bool{}
	for _, w := range words(s) {
		have[w] = true
	}
	ws := words(detail)
	for _, w := range ws {
		if !have[w] {
			return false
		}
	}
	return len(ws) > 0
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' || r >= 0x80)
	})
}

// internalTopics are Kafka's internal topic names: only the brokers'
// coordinators write and shape them.
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true, "__share_group_state": true}

// internalTopicSentence explains a rejected change to an internal topic.
// Brokers answer it with a generic code (INVALID_TOPIC_EXCEPTION, whose
// usual meaning is a badly spelt name, or INVALID_REQUEST), so the reason
// is said here, in the terms of the operation.
func internalTopicSentence(e *Error) (string, bool) {
	switch e.Kafka {
	case kerr.InvalidTopicException, kerr.InvalidRequest, kerr.PolicyViolation, kerr.InvalidConfig, kerr.InvalidPartitions:
	default:
		return "", false
	}
	name, ok := resourceTopic(e.Resource)
	if !ok || !internalTopics[name] {
		return "", false
	}
	what := "cannot be changed by clients"
	switch e.Op {
	case "drop topic":
		what = "cannot be dropped"
	case "create topic":
		what = "cannot be created by clients: the broker creates it itself"
	case "alter configs of":
		what = "its configs cannot be changed"
	case "add partitions to":
		what = "cannot get more partitions"
	case "produce to":
		what = "cannot be written to"
	case "delete records of":
		what = "its records cannot be deleted"
	}
	joiner := " and "
	if strings.HasPrefix(what, "its ") {
		joiner = ": "
	}
	return name + " is an internal topic" + joiner + what, true
}

// resourceTopic returns the topic a resource built by topicRes or partRes
// names.
func resourceTopic(res string) (string, bool) {
	i := strings.LastIndex(res, "topic '")
	if i < 0 || !strings.HasSuffix(res, "'") {
		return "", false
	}
	return res[i+len("topic '") : len(res)-1], true
}

// Explain returns a plain-language explanation of err suitable for showing to
// a person, e.g. "topic 'x' does not exist" for UNKNOWN_TOPIC_OR_PARTITION.
// Combine with ErrorName to show the Kafka error name as well. For errors not
// produced by this package it returns err.Error(); for nil it returns "".
func Explain(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.explain()
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return explainCode(ke, "")
	}
	if isNetworkError(err) {
		return explainTransport(err)
	}
	return err.Error()
}

// ErrorName returns the Kafka error name carried by err
// (e.g. "UNKNOWN_TOPIC_OR_PARTITION"), or "" if err has no Kafka code.
func ErrorName(err error) string {
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Message
	}
	return ""
}

// explainCode is the table of plain explanations for the Kafka error codes a
// console or dashboard user is likely to meet. Unknown codes fall back to
// franz-go's one-line description.
func explainCode(ke *kerr.Error, resource string) string {
	if ke == nil {
		return ""
	}
	// A resource may name a group and where it was working ("group 'g' on
	// topic 't'"): a topic's code is about the topic, a group's about the
	// group.
	what := resource
	if g, t, ok := strings.Cut(resource, " on "); ok {
		what = g
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.TopicAuthorizationFailed:
			what = t
		}
	}
	if what == "" {
		what = "the requested resource"
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.UnknownTopicID:
		return what + " does not exist"
	case kerr.TopicAlreadyExists:
		return what + " already exists"
	case kerr.GroupIDNotFound, kerr.ResourceNotFound, kerr.TransactionalIDNotFound:
		return what + " does not exist"
	case kerr.NonEmptyGroup:
		return what + " still has active members; stop its consumers first"
	case kerr.InvalidTopicException:
		return "the topic name is not valid: use up to 249 letters, digits, '.', '_' or '-', and not '.' or '..'"
	case kerr.InvalidPartitions:
		return "the partition count is not valid (it must be at least 1, and can only grow)"
	case kerr.InvalidReplicationFactor:
		return "the replication factor must be at least 1 and at most the number of brokers"
	case kerr.InvalidReplicaAssignment:
		return "the replica assignment is not valid"
	case kerr.InvalidConfig:
		return "a config key or value is not valid for " + what
	case kerr.PolicyViolation:
		return "the broker's policy rejected the request"
	case kerr.InvalidRequest:
		return "the broker rejected the request as malformed or not allowed"
	case kerr.TopicDeletionDisabled:
		return "topic deletion is disabled on the broker"
	case kerr.OffsetOutOfRange:
		return "the offset is outside the partition's log (before its start or after its end)"
	case kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.FencedLeaderEpoch,
		kerr.UnknownLeaderEpoch:
		return "partition leadership is moving; retry in a moment"
	case kerr.NotController:
		return "the controller is moving; retry in a moment"
	case kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.CoordinatorLoadInProgress:
		if strings.HasPrefix(what, "transaction ") {
			return "the transaction coordinator is not ready; retry in a moment"
		}
		return "the group coordinator is not ready; retry in a moment"
	case kerr.RequestTimedOut:
		return "the broker did not complete the request in time"
	case kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend:
		return "fewer replicas are in sync than the topic's min.insync.replicas"
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return "the record batch is larger than the topic's max.message.bytes"
	case kerr.CorruptMessage:
		return "the broker found a corrupt record batch"
	case kerr.InvalidTimestamp:
		return "a record timestamp is outside the range the topic accepts"
	case kerr.UnsupportedCompressionType:
		return "the broker does not accept this compression codec"
	case kerr.UnsupportedVersion:
		return "the broker does not support this request version"
	case kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress:
		return what + " is rebalancing or has members; offsets can only be changed while it is empty"
	case kerr.InvalidGroupID:
		return "the group name is not valid"
	case kerr.TopicAuthorizationFailed:
		return "not authorized to access " + what
	case kerr.GroupAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed:
		return "not authorized to access " + what
	case kerr.ClusterAuthorizationFailed:
		return "not authorized to perform cluster operations"
	case kerr.SaslAuthenticationFailed:
		return "authentication failed; check the user name and password"
	case kerr.ReassignmentInProgress:
		return "a partition reassignment is in progress; retry when it finishes"
	case kerr.KafkaStorageError:
		return "the broker could not read or write its log directory"
	case kerr.UnknownServerError:
		return "the broker failed unexpectedly; see its log"
	}
	if ke.Description != "" {
		return strings.TrimSuffix(ke.Description, ".")
	}
	return strings.ToLower(strings.ReplaceAll(ke.Message, "_", " "))
}

func explainTransport(err error) string {
	switch {
	case err == nil:
		return "unknown error"
	case errors.Is(err, errTxnEnded):
		return "the transaction was already committed or aborted"
	case errors.Is(err, ErrClosed):
		return "the client is closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out waiting for the broker"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: is a broker listening at that address?"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "the connection was closed during the handshake: is that address a Kafka broker?"
	case isUnsupportedRequest(err):
		return "the broker does not support this request"
	}
	if te, ok := errors.AsType[*TLSError](err); ok {
		return explainTLS(te)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "cannot resolve host " + dnsErr.Name
	}
	if ae, ok := errors.AsType[*net.AddrError](err); ok {
		return ae.Err + " " + ae.Addr // "invalid port 99999"
	}
	return err.Error()
}

// isNetworkError reports whether err is a transport failure rather than an
// answer from a broker.
func isNetworkError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// isUnsupportedRequest recognises franz-go's (unexported) errors for a request
// key the broker does not advertise in ApiVersions.
func isUnsupportedRequest(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "unknown request key") || strings.Contains(s, "broker is too old") ||
		strings.Contains(s, "not know how to handle")
}

// wrap builds an *Error for op on resource, keeping the Kafka code if err
// carries one. It returns nil for a nil err and leaves an *Error untouched.
func wrap(op, resource string, err error) error {
	return wrapDetail(op, resource, err, "")
}

func wrapDetail(op, resource string, err error, detail string) error {
	if err == nil {
		return nil
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	e := &Error{Op: op, Resource: resource, Err: err, Detail: detail}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		e.Kafka = ke
	} else if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && len(se.Errs) > 0 {
		// A sharded request failed on some brokers: surface the first
		// cause, which is what a person needs to act on.
		if ke, ok := errors.AsType[*kerr.Error](se.Errs[0].Err); ok {
			e.Kafka = ke
		}
	}
	return e
}

// invalid builds an ErrInvalidArgument error for a locally rejected request.
func invalid(op, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", op, ErrInvalidArgument, fmt.Sprintf(format, args...))
}

func topicRes(name string) string { return "topic '" + name + "'" }
func groupRes(name string) string { return "group '" + name + "'" }
func partRes(topic string, p int32) string {
	return fmt.Sprintf("partition %d of topic '%s'", p, topic)
}

// explainTLS says what to do about a failed TLS handshake.
func explainTLS(e *TLSError) string {
	msg := e.Error()
	var (
		unknownCA x509.UnknownAuthorityError
		badHost   x509.HostnameError
		header    tls.RecordHeaderError
	)
	switch {
	case errors.As(e.Err, &unknownCA):
		return msg + "; pass the CA that signed the broker's certificate (--tls-ca or ssl.ca.location)"
	case errors.As(e.Err, &badHost):
		return msg + "; connect by a name the certificate lists, or set the server name"
	case errors.As(e.Err, &header), errors.Is(e.Err, io.EOF):
		return msg + "; the broker did not answer TLS: does this listener use TLS?"
	}
	return msg
}
