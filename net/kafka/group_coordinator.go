package kafka

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/coord"
	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/txncoord"
)

// Group handlers share these helpers. The group coordinator is optional in
// Options; without it every group API answers COORDINATOR_NOT_AVAILABLE.

// groupWait bounds FindCoordinator's creation of the offsets topic. A
// parked group request's wait for durability is bounded by the
// coordinator (its rebalance wait by the group's timeouts).
const groupWait = 30 * time.Second

// coordinatorTypes are FindCoordinator key types.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

// clientHost is the member's host as Kafka reports it ("/127.0.0.1").
func (c *conn) clientHost() string {
	host, _, err := net.SplitHostPort(c.peer)
	if err != nil {
		host = c.peer
	}
	return "/" + host
}

// answer answers a group request from its reply: on the read loop when
// the reply is ready (durable), else parked until it is. fill builds the
// response from the reply's value and the error of waiting for it (its
// value is still given then, e.g. a commit's per-partition errors).
func answer[T any](c *conn, r *group.Reply[T], fill func(v T, err error) kmsg.Response) (kmsg.Response, func() kmsg.Response) {
	if v, ok := r.Ready(); ok {
		return fill(v, nil), nil
	}
	return nil, func() kmsg.Response { return fill(r.Wait(c.ctx)) }
}

// firstErr is a reply's own error unless waiting for it failed.
func firstErr(own, wait error) error {
	if wait != nil {
		return wait
	}
	return own
}

func (c *conn) handleFindCoordinator(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	// DESCRIBE on the group or transactional id, per key (Kafka); a
	// request whose keys are all refused creates no internal topic.
	z := c.authz(r)
	denied := map[string]int16{}
	refused := 0
	for _, k := range keys {
		switch req.CoordinatorType {
		case coordinatorGroup:
			if !z.allowed(acl.OpDescribe, acl.ResourceGroup, k) {
				denied[k] = kerr.GroupAuthorizationFailed.Code
			}
		case coordinatorTransaction:
			if !z.allowed(acl.OpDescribe, acl.ResourceTransactionalID, k) {
				denied[k] = kerr.TransactionalIDAuthorizationFailed.Code
			}
		}
		if _, ok := denied[k]; ok {
			refused++
		}
	}
	// answer answers every key: with err, or (nil) with the key's
	// coordinator, the leader of its offsets partition (the metadata is
	// read once for all the keys).
	answer := func(err error) {
		var coordinatorOf func(string) (int32, string, int32, error)
		switch {
		case err != nil:
		case req.CoordinatorType == coordinatorGroup:
			coordinatorOf = c.coordinators(group.OffsetsTopic)
		case req.CoordinatorType == coordinatorTransaction && c.s.opts.Txns != nil:
			coordinatorOf = c.coordinators(txncoord.Topic)
		}
		for _, k := range keys {
			node, host, port := c.s.opts.NodeID, c.s.advHost, c.s.advPort
			kerr := err
			if coordinatorOf != nil {
				node, host, port, kerr = coordinatorOf(k)
			}
			code := c.errCode(kerr)
			var msg *string
			if kerr != nil {
				msg = errMessage(kerr)
				node, host, port = -1, "", -1
			}
			if d, ok := denied[k]; ok {
				code, msg, node, host, port = d, nil, -1, "", -1
			}
			if req.Version < 4 {
				resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = code, msg, node, host, port
				return
			}
			resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{
				Key: k, NodeID: node, Host: host, Port: port, ErrorCode: code, ErrorMessage: msg,
			})
		}
	}
	if refused > 0 && refused == len(keys) {
		answer(nil)
		return resp, nil
	}
	switch req.CoordinatorType {
	case coordinatorGroup:
	case coordinatorTransaction:
		txns := c.s.opts.Txns
		if txns == nil {
			// No transaction coordinator: this node, whose
			// InitProducerId says transactions are not supported.
			answer(nil)
			return resp, nil
		}
		// The first transactional client creates __transaction_state.
		return nil, func() kmsg.Response {
			ctx, cancel := context.WithTimeout(c.ctx, groupWait)
			defer cancel()
			_, err := txns.EnsureTopic(ctx)
			if err != nil {
				c.s.log.Warn("transaction coordinator unavailable", "peer", c.peer, "err", err)
			}
			answer(err)
			return resp
		}
	default:
		answer(kerr.InvalidRequest)
		return resp, nil
	}
	groups := c.s.opts.Groups
	if groups == nil {
		answer(kerr.CoordinatorNotAvailable)
		return resp, nil
	}
	// The first group client creates __consumer_offsets, which goes through
	// the metadata log: park it.
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(c.ctx, groupWait)
		defer cancel()
		err := groups.EnsureTopic(ctx)
		if err != nil {
			c.s.log.Warn("group coordinator unavailable", "peer", c.peer, "err", err)
		}
		answer(err)
		return resp
	}
}

// coordinators returns, from one read of the metadata, the broker that
// coordinates a key (a group, a transactional id): the leader of its
// partition of the internal topic (this node on a single node). A
// partition without a live leader is COORDINATOR_NOT_AVAILABLE, which
// clients retry.
func (c *conn) coordinators(topic string) func(key string) (int32, string, int32, error) {
	t, ok := c.s.meta.Topic(topic)
	live := map[int32]metadata.Broker{}
	for _, b := range c.s.liveBrokers() {
		live[b.ID] = b
	}
	return func(key string) (int32, string, int32, error) {
		if !ok || len(t.Partitions) == 0 {
			return 0, "", 0, fmt.Errorf("%w: %s does not exist yet", kerr.CoordinatorNotAvailable, topic)
		}
		p := t.Partitions[coord.PartitionFor(key, int32(len(t.Partitions)))]
		if b, ok := live[p.Leader]; ok {
			return b.ID, b.Host, b.Port, nil
		}
		return 0, "", 0, fmt.Errorf("%w: %s-%d has no live leader", kerr.CoordinatorNotAvailable, topic, p.ID)
	}
}

// groupsOrUnavailable returns the coordinator or the error to answer.
func (c *conn) groupsOrUnavailable() (*group.Coordinator, int16) {
	if c.s.opts.Groups == nil {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return c.s.opts.Groups, 0
}
