package mql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/moonmq/moonmq/net/client"
)

// errorClass keeps errors.Is working through a message that already says
// everything, without repeating the wrapped error's text.
type errorClass struct{ err error }

func (e errorClass) Error() string { return "" }
func (e errorClass) Unwrap() error { return e.err }

// ---- Transactions ----

func (s *Session) beginTxn(ctx context.Context, cl *client.Client, st *BeginTxn) error {
	if s.txn != nil {
		return fmt.Errorf("transaction %s is already open: COMMIT TRANSACTION or ABORT TRANSACTION first", quoteRes(s.txn.ID()))
	}
	if err := s.require(ctx, cl, featTxn); err != nil {
		return err
	}
	id := ""
	if st.ID != nil {
		id = string(*st.ID)
	} else {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id = "mql-" + hex.EncodeToString(b[:])
	}
	t, err := cl.BeginTransaction(ctx, id)
	if err != nil {
		return err
	}
	s.txn = t
	s.out.OK(fmt.Sprintf("transaction %s begun", quoteRes(id)))
	return nil
}

func (s *Session) endTxn(ctx context.Context, commit bool) error {
	if s.txn == nil {
		return errors.New("no transaction is open (BEGIN TRANSACTION first)")
	}
	t := s.txn
	s.txn = nil
	verb, end := "aborted", t.Abort
	if commit {
		verb, end = "committed", t.Commit
	}
	if err := end(ctx); err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("transaction %s %s", quoteRes(t.ID()), verb))
	return nil
}

// showTransactions lists the transactional ids every broker coordinates.
// A broker without transactions says so (the core transaction APIs); one
// with transactions but without ListTransactions (Kafka before 3.0) says
// that instead.
func (s *Session) showTransactions(ctx context.Context, cl *client.Client, st *ShowTransactions) error {
	if err := s.require(ctx, cl, featTxn); err != nil {
		return err
	}
	if err := s.require(ctx, cl, featTxnList); err != nil {
		return err
	}
	txns, err := cl.ListTransactions(ctx)
	if err != nil {
		return err
	}
	var like *regexp.Regexp
	if st.Like != nil {
		like = likeRegexp(string(*st.Like))
	}
	t := &Table{Columns: []string{"transaction", "state", "producer_id", "coordinator"}}
	for _, x := range txns {
		if like != nil && !like.MatchString(x.ID) {
			continue
		}
		t.Rows = append(t.Rows, []any{x.ID, x.State, x.ProducerID, int64(x.Coordinator)})
	}
	s.out.Table(t)
	return nil
}

// describeTransaction shows one transactional id as its coordinator sees
// it, then the partitions its transaction in progress wrote to.
func (s *Session) describeTransaction(ctx context.Context, cl *client.Client, st *DescribeTransaction) error {
	if err := s.require(ctx, cl, featTxn); err != nil {
		return err
	}
	if err := s.require(ctx, cl, featTxnDescribe); err != nil {
		return err
	}
	d, err := cl.DescribeTransaction(ctx, string(st.Name))
	if err != nil {
		return err
	}
	var started any
	if !d.Started.IsZero() {
		started = d.Started
	}
	s.out.Table(&Table{
		Kind:    "transaction",
		Columns: []string{"transaction", "state", "producer_id", "producer_epoch", "timeout_ms", "started", "coordinator"},
		Rows: [][]any{{d.ID, d.State, d.ProducerID, int64(d.ProducerEpoch), d.Timeout.Milliseconds(), started,
			int64(d.Coordinator)}},
	})
	parts := &Table{Title: "partitions", Kind: "partition", Columns: []string{"topic", "partition"}}
	for _, tp := range d.Partitions {
		for _, p := range tp.Partitions {
			parts.Rows = append(parts.Rows, []any{tp.Topic, int64(p)})
		}
	}
	s.out.Table(parts)
	return nil
}

// isolationOf maps an ISOLATION clause to the client's isolation.
func isolationOf(i *Isolation) client.Isolation {
	if i != nil && i.Committed {
		return client.ReadCommitted
	}
	return client.ReadUncommitted
}

// isolationText is how acknowledgements name an isolation: "read
// committed (Kafka's read_committed)".
func isolationText(i client.Isolation) string {
	if i == client.ReadCommitted {
		return "read committed: reads skip aborted transactions and stop at open ones"
	}
	return "read uncommitted: reads include records of open and aborted transactions"
}

// ---- Users ----

// scramMechanism checks a MECHANISM clause ("" without one, meaning
// SCRAM-SHA-256).
func scramMechanism(m *Str) (string, error) {
	if m == nil {
		return client.ScramSHA256, nil
	}
	switch v := strings.ToUpper(string(*m)); v {
	case client.ScramSHA256, client.ScramSHA512:
		return v, nil
	}
	return "", fmt.Errorf("unknown mechanism %s (want 'SCRAM-SHA-256' or 'SCRAM-SHA-512')", Quote(string(*m)))
}

func (s *Session) createUser(ctx context.Context, cl *client.Client, st *CreateUser) error {
	mech, err := scramMechanism(st.Mechanism)
	if err != nil {
		return err
	}
	if err := s.require(ctx, cl, featUsers); err != nil {
		return err
	}
	user := string(st.Name)
	if err := cl.UpsertUser(ctx, user, mech, string(st.Password), client.DefaultScramIterations); err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("user %s created (%s)", quoteRes(user), mech))
	return nil
}

func (s *Session) dropUser(ctx context.Context, cl *client.Client, st *DropUser) error {
	if err := s.require(ctx, cl, featUsers); err != nil {
		return err
	}
	user := string(st.Name)
	var mechs []string
	if st.Mechanism != nil {
		m, err := scramMechanism(st.Mechanism)
		if err != nil {
			return err
		}
		mechs = append(mechs, m)
	}
	if err := cl.DeleteUser(ctx, user, mechs...); err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("user %s dropped", quoteRes(user)))
	return nil
}

func (s *Session) showUsers(ctx context.Context, cl *client.Client) error {
	if err := s.require(ctx, cl, featUsers); err != nil {
		return err
	}
	creds, err := cl.ListUsers(ctx)
	if err != nil {
		return err
	}
	t := &Table{Columns: []string{"user", "mechanism", "iterations"}}
	for _, c := range creds {
		t.Rows = append(t.Rows, []any{c.User, c.Mechanism, int64(c.Iterations)})
	}
	s.out.Table(t)
	return nil
}

// ---- ACLs ----

func (s *Session) grant(ctx context.Context, cl *client.Client, ops []Name, res *Resource, who string, allow bool) error {
	if err := s.require(ctx, cl, featACLs); err != nil {
		return err
	}
	names := make([]string, 0, len(ops))
	for _, o := range ops {
		if !client.IsACLOperation(string(o)) {
			return fmt.Errorf("unknown ACL operation %s", o)
		}
		names = append(names, strings.ToUpper(string(o)))
	}
	r := client.ACLResource{Name: string(res.Name), Prefixed: res.Prefixed}
	target := "the cluster"
	switch {
	case res.Cluster:
		r.Type = "cluster"
	case res.Kind == "TOPIC":
		r.Type = "topic"
		target = "topic " + quoteRes(r.Name)
	default:
		r.Type = "group"
		target = "group " + quoteRes(r.Name)
	}
	if res.Prefixed {
		target += " (prefix)"
	}
	principal := client.Principal(who)
	if allow {
		if err := cl.Grant(ctx, principal, names, r); err != nil {
			return err
		}
		s.out.OK(fmt.Sprintf("granted %s on %s to %s", strings.Join(names, ", "), target, principal))
		return nil
	}
	n, err := cl.Revoke(ctx, principal, names, r)
	if err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("revoked %s on %s from %s (%s removed)", strings.Join(names, ", "), target, principal, plural(int64(n), "ACL")))
	return nil
}

func (s *Session) showAcls(ctx context.Context, cl *client.Client, st *ShowAcls) error {
	if err := s.require(ctx, cl, featACLs); err != nil {
		return err
	}
	who := ""
	if st.Principal != nil {
		who = string(*st.Principal)
	}
	acls, err := cl.ListACLs(ctx, who)
	if err != nil {
		return err
	}
	t := &Table{Columns: []string{"principal", "host", "resource", "name", "pattern", "operation", "permission"}}
	for _, a := range acls {
		t.Rows = append(t.Rows, []any{a.Principal, a.Host, a.ResourceType, a.ResourceName, a.Pattern, a.Operation, a.Permission})
	}
	s.out.Table(t)
	return nil
}

// ---- Cluster ----

// showBrokers lists the live brokers and, as "down", the brokers that
// host replicas but are not listed (fenced or unreachable), with the
// partitions each leads and hosts.
func (s *Session) showBrokers(ctx context.Context, cl *client.Client) error {
	h, err := cl.Health(ctx)
	if err != nil {
		return err
	}
	t := &Table{Columns: []string{"id", "host", "port", "rack", "controller", "status", "leaders", "replicas"}}
	rows := map[int32][]any{}
	for _, b := range h.Brokers {
		var rack any
		if b.Rack != "" {
			rack = b.Rack
		}
		rows[b.ID] = []any{int64(b.ID), b.Host, int64(b.Port), rack, b.ID == h.Controller, "up",
			int64(h.Leaders[b.ID]), int64(h.Replicas[b.ID])}
	}
	for _, id := range h.Down {
		rows[id] = []any{int64(id), nil, nil, nil, false, "down", int64(h.Leaders[id]), int64(h.Replicas[id])}
	}
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		t.Rows = append(t.Rows, rows[id])
	}
	s.out.Table(t)
	return nil
}

func (s *Session) showCluster(ctx context.Context, cl *client.Client) error {
	h, err := cl.Health(ctx)
	if err != nil {
		return err
	}
	var id, ctrl any
	if h.ID != "" {
		id = h.ID
	}
	if h.Controller >= 0 {
		ctrl = int64(h.Controller)
	}
	t := &Table{
		Columns: []string{"cluster_id", "controller", "brokers", "brokers_down", "partitions", "under_replicated", "offline"},
		Rows: [][]any{{id, ctrl, int64(len(h.Brokers)), int64(len(h.Down)), int64(h.Partitions),
			int64(h.UnderReplicated), int64(h.Offline)}},
	}
	s.out.Table(t)
	return nil
}

func (s *Session) movePartition(ctx context.Context, cl *client.Client, st *MovePartition) error {
	if err := s.require(ctx, cl, featReassign); err != nil {
		return err
	}
	topic, p := string(st.Topic), int32(st.Partition)
	brokers := make([]int32, len(st.Brokers))
	for i, b := range st.Brokers {
		brokers[i] = int32(b)
	}
	if err := cl.MovePartition(ctx, topic, p, brokers); err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("reassigning %s[%d] to brokers %v", topic, p, brokers))
	return nil
}

func (s *Session) showReassignments(ctx context.Context, cl *client.Client) error {
	if err := s.require(ctx, cl, featReassign); err != nil {
		return err
	}
	rs, err := cl.ListReassignments(ctx)
	if err != nil {
		return err
	}
	t := &Table{Columns: []string{"topic", "partition", "replicas", "adding", "removing"}}
	for _, r := range rs {
		t.Rows = append(t.Rows, []any{r.Topic, int64(r.Partition), r.Replicas, r.Adding, r.Removing})
	}
	s.out.Table(t)
	return nil
}
