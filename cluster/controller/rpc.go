package controller

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// The controller RPC forwards a write from any node to the active
// controller, which plans and proposes it and answers with the result and
// the log index of the entry, so the caller can wait until its own state
// (and its reconciler) reached that index before answering its client.
//
// On the wire, after the mux byte, each request and each response is a
// frame: a 4-byte big-endian length and that many bytes of JSON, at most
// maxRPCRequest (a request) or maxRPCFrame (a response). A connection
// carries requests one at a time; the client dials one per request
// (forwarded writes are rare: admin requests, registrations, ISR changes),
// so there is no pool to go stale when the controller moves. The cluster
// port is trusted (as Raft's is): it is not authenticated.

// maxRPCFrame bounds a response frame: a topic at the partition limit
// with every replica listed, and then some. maxRPCRequest bounds a
// request (a topic's name and config overrides, an ISR), which is what an
// unauthenticated peer can make the server allocate. A frame announcing
// more is refused and its connection cut off.
const (
	maxRPCFrame   = 16 << 20
	maxRPCRequest = 1 << 20
)

// rpcIdleTimeout closes a server connection that sends nothing.
const rpcIdleTimeout = time.Minute

// Operations of the controller RPC.
const (
	rpcCreateTopic        = "create_topic"
	rpcDeleteTopic        = "delete_topic"
	rpcCreatePartitions   = "create_partitions"
	rpcAlterConfigs       = "alter_configs"
	rpcReplaceConfigs     = "replace_configs"
	rpcAllocProducerIDs   = "allocate_producer_ids"
	rpcRegisterBroker     = "register_broker"
	rpcAlterPartition     = "alter_partition"
	rpcControlledShutdown = "controlled_shutdown"
	// rpcReportReplicaStorage carries replicaStorageArgs.
	rpcReportReplicaStorage = "report_replica_storage"
)

// rpcIdempotent are the operations a caller may resend when it does not
// know whether the first attempt reached the controller: doing them twice
// is doing them once.
var rpcIdempotent = map[string]bool{rpcReplaceConfigs: true, rpcRegisterBroker: true, rpcControlledShutdown: true,
	rpcReportReplicaStorage: true}

type rpcRequest struct {
	Op string `json:"op"`
	// TimeoutMs is what is left of the caller's deadline.
	TimeoutMs int64           `json:"timeout_ms"`
	Args      json.RawMessage `json:"args"`
}

type rpcResponse struct {
	Index  uint64          `json:"index,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Err    *rpcError       `json:"err,omitempty"`
}

// rpcError carries an error's message and the sentinels it matches, so
// errors.Is holds on the caller's side as it did on the controller's.
type rpcError struct {
	Msg   string   `json:"msg"`
	Codes []string `json:"codes,omitempty"`
}

// wireErrors are the sentinels that survive the trip, by a stable name.
var wireErrors = []struct {
	code string
	err  error
}{
	{"topic_exists", metadata.ErrTopicExists},
	{"unknown_topic", metadata.ErrUnknownTopic},
	{"invalid_partitions", metadata.ErrInvalidPartitions},
	{"invalid_replication_factor", metadata.ErrInvalidReplicationFactor},
	{"invalid_topic_name", metadata.ErrInvalidTopicName},
	{"not_controller", metadata.ErrNotController},
	{"invalid_request", metadata.ErrInvalidRequest},
	{"producer_ids_exhausted", metadata.ErrProducerIDsExhausted},
	{"closed", metadata.ErrClosed},
	{"invalid_config", metadata.ErrInvalidConfig},
	{"topicconfig_invalid", topicconfig.ErrInvalid},
	{"fenced_leader_epoch", metadata.ErrFencedLeaderEpoch},
	{"invalid_update_version", metadata.ErrInvalidUpdateVersion},
	{"ineligible_replica", metadata.ErrIneligibleReplica},
	{"broker_not_available", metadata.ErrBrokerNotAvailable},
	{"state_broken", ErrStateBroken},
	{"resource_not_found", metadata.ErrResourceNotFound},
	{"unsupported_sasl_mechanism", metadata.ErrUnsupportedSaslMechanism},
	{"unacceptable_credential", metadata.ErrUnacceptableCredential},
	{"duplicate_resource", metadata.ErrDuplicateResource},
	{"unsupported_quota_entity", metadata.ErrUnsupportedQuotaEntity},
	{"deadline_exceeded", context.DeadlineExceeded},
	{"canceled", context.Canceled},
}

func toRPCError(err error) *rpcError {
	e := &rpcError{Msg: err.Error()}
	for _, w := range wireErrors {
		if errors.Is(err, w.err) {
			e.Codes = append(e.Codes, w.code)
		}
	}
	return e
}

// remoteError is an error the active controller returned.
type remoteError struct {
	msg string
	is  []error
}

func (e *remoteError) Error() string        { return e.msg }
func (e *remoteError) Is(target error) bool { return slices.Contains(e.is, target) }

func (e *rpcError) toError() error {
	out := &remoteError{msg: e.Msg}
	for _, c := range e.Codes {
		for _, w := range wireErrors {
			if w.code == c {
				out.is = append(out.is, w.err)
			}
		}
	}
	return out
}

func writeFrame(w io.Writer, v any, limit int) error {
	js, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	if len(js) > limit {
		return fmt.Errorf("%w: frame of %d bytes; the limit is %d", metadata.ErrInvalidRequest, len(js), limit)
	}
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(js)), uint32(len(js)))
	_, err = w.Write(append(buf, js...))
	return err
}

func readFrame(r io.Reader, v any, limit int) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(limit) {
		return fmt.Errorf("%w: frame of %d bytes; the limit is %d", metadata.ErrInvalidRequest, n, limit)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return err
	}
	if err := json.Unmarshal(buf, v); err != nil {
		return fmt.Errorf("%w: decode frame: %v", metadata.ErrInvalidRequest, err)
	}
	return nil
}

// errNotSent marks a call that failed before its request was written: it
// is safe to retry whatever the operation.
var errNotSent = errors.New("request not sent")

// call sends one request to the controller RPC at addr and waits for the
// answer, within ctx.
func call(ctx context.Context, dial dialFunc, addr, op string, args any, out any) (uint64, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, fmt.Errorf("controller rpc %s: no deadline", op)
	}
	rawArgs, err := json.Marshal(args)
	if err != nil {
		return 0, fmt.Errorf("controller rpc %s: encode: %w", op, err)
	}
	conn, err := dialCluster(ctx, dial, addr, muxRPC)
	if err != nil {
		return 0, fmt.Errorf("controller rpc %s to %s: %w: %w", op, addr, errNotSent, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) }) // cancellation
	defer stop()
	req := rpcRequest{Op: op, TimeoutMs: max(time.Until(dl).Milliseconds(), 1), Args: rawArgs}
	if err := writeFrame(conn, &req, maxRPCRequest); err != nil {
		return 0, fmt.Errorf("controller rpc %s to %s: %w: %w", op, addr, errNotSent, err)
	}
	var resp rpcResponse
	if err := readFrame(conn, &resp, maxRPCFrame); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return 0, fmt.Errorf("controller rpc %s to %s: no answer (the change may still be applied): %w", op, addr, err)
	}
	if resp.Err != nil {
		return 0, resp.Err.toError()
	}
	if out != nil && len(resp.Result) > 0 {
		if err := json.Unmarshal(resp.Result, out); err != nil {
			return 0, fmt.Errorf("controller rpc %s: decode result: %w", op, err)
		}
	}
	return resp.Index, nil
}

// serveRPC answers requests on one connection until it ends.
func (c *Controller) serveRPC(conn net.Conn) {
	for {
		_ = conn.SetReadDeadline(time.Now().Add(rpcIdleTimeout))
		var req rpcRequest
		if err := readFrame(conn, &req, maxRPCRequest); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.logger.Debug("controller rpc connection ended", "remote", conn.RemoteAddr(), "err", err)
			}
			return
		}
		_ = conn.SetReadDeadline(time.Time{})
		timeout := min(time.Duration(req.TimeoutMs)*time.Millisecond, c.opts.ApplyTimeout)
		ctx, cancel := context.WithTimeout(c.stopCtx, max(timeout, time.Millisecond))
		res, index, err := c.dispatch(ctx, req.Op, req.Args)
		cancel()
		resp := rpcResponse{Index: index}
		if err == nil {
			resp.Result, err = json.Marshal(res)
		}
		if err != nil {
			resp = rpcResponse{Err: toRPCError(err)}
		}
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		err = writeFrame(conn, &resp, maxRPCFrame)
		if errors.Is(err, metadata.ErrInvalidRequest) { // too large: say so
			err = writeFrame(conn, &rpcResponse{Err: toRPCError(err)}, maxRPCFrame)
		}
		if err != nil {
			c.logger.Debug("controller rpc: answer not delivered", "op", req.Op, "remote", conn.RemoteAddr(), "err", err)
			return
		}
	}
}

// rpcHandler decodes an operation's arguments and runs it on the active
// controller.
type rpcHandler func(c *Controller, ctx context.Context, args json.RawMessage) (any, uint64, error)

func handler[A, R any](fn func(c *Controller, ctx context.Context, a A) (R, uint64, error)) rpcHandler {
	return func(c *Controller, ctx context.Context, raw json.RawMessage) (any, uint64, error) {
		var a A
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, 0, fmt.Errorf("%w: decode arguments: %v", metadata.ErrInvalidRequest, err)
		}
		return fn(c, ctx, a)
	}
}

var rpcHandlers = map[string]rpcHandler{
	rpcCreateTopic:        handler((*Controller).createTopicLocal),
	rpcDeleteTopic:        handler((*Controller).deleteTopicLocal),
	rpcCreatePartitions:   handler((*Controller).createPartitionsLocal),
	rpcAlterConfigs:       handler((*Controller).alterConfigsLocal),
	rpcReplaceConfigs:     handler((*Controller).replaceConfigsLocal),
	rpcAllocProducerIDs:   handler((*Controller).allocateProducerIDsLocal),
	rpcRegisterBroker:     handler((*Controller).registerBrokerLocal),
	rpcAlterPartition:     handler((*Controller).alterPartitionLocal),
	rpcControlledShutdown: handler((*Controller).controlledShutdownLocal),
	// A broker's report on its replicas' storage (ReportReplicaStorage).
	rpcReportReplicaStorage: handler((*Controller).reportReplicaStorageLocal),
	// The security metadata (security.go).
	rpcCreateACLs:            handler((*Controller).createACLsLocal),
	rpcDeleteACLs:            handler((*Controller).deleteACLsLocal),
	rpcAlterScramCredentials: handler((*Controller).alterScramLocal),
	rpcAlterClientQuotas:     handler((*Controller).alterClientQuotasLocal),
}

func (c *Controller) dispatch(ctx context.Context, op string, args json.RawMessage) (any, uint64, error) {
	h, ok := rpcHandlers[op]
	if !ok {
		return nil, 0, fmt.Errorf("%w: unknown controller operation %q", metadata.ErrInvalidRequest, op)
	}
	return h(c, ctx, args)
}
