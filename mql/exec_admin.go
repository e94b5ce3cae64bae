package mql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/net/client"
)

// kafkaErr gives a raw franz-go error the console's usual shape:
// "op: KAFKA_NAME: explanation". Errors already shaped by net/client are
// returned as they are.
func kafkaErr(op string, err error, detail string) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		return err
	}
	msg := client.Explain(err)
	if name := client.ErrorName(err); name != "" {
		msg = name + ": " + msg
	}
	if detail != "" && !strings.Contains(msg, detail) {
		msg += " (" + detail + ")"
	}
	return fmt.Errorf("%s: %s: %w", op, msg, errorClass{err})
}

// errorClass keeps errors.Is working through kafkaErr without repeating
// the message.
type errorClass struct{ err error }

func (e errorClass) Error() string { return "" }
func (e errorClass) Unwrap() error { return e.err }

// ---- Transactions ----

// txn is an open transaction: a transactional franz-go producer. Like the
// group member, net/client has no API for it, so it is built here from the
// connection's options.
type txn struct {
	id string
	cl *kgo.Client
	rr int // round-robin cursor for keyless records
}

func (s *Session) beginTxn(ctx context.Context, cl *client.Client, st *BeginTxn) error {
	if s.txn != nil {
		return fmt.Errorf("transaction %s is already open: COMMIT TRANSACTION or ABORT TRANSACTION first", quoteRes(s.txn.id))
	}
	if err := s.require(ctx, cl, featTxn); err != nil {
		return fmt.Errorf("BEGIN TRANSACTION: %w", err)
	}
	id := ""
	if st.ID != nil {
		id = string(*st.ID)
	} else {
		var b [6]byte
		_, _ = rand.Read(b[:])
		id = "mql-" + hex.EncodeToString(b[:])
	}
	opts := cl.Options()
	kcl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(opts.Addr, ",")...),
		kgo.ClientID(opts.ClientID),
		kgo.DialTimeout(opts.DialTimeout),
		kgo.RetryTimeout(opts.RequestTimeout),
		kgo.TransactionalID(id),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		return fmt.Errorf("begin transaction %s: %w", quoteRes(id), err)
	}
	if err := kcl.BeginTransaction(); err != nil {
		kcl.Close()
		return kafkaErr("begin transaction "+quoteRes(id), err, "")
	}
	s.txn = &txn{id: id, cl: kcl}
	s.out.OK(fmt.Sprintf("transaction %s begun", quoteRes(id)))
	return nil
}

// produce writes records inside the transaction, choosing partitions like
// the non-transactional path (explicit, murmur2 of the key, round-robin).
func (t *txn) produce(ctx context.Context, cl *client.Client, topic string, recs []client.Record) ([]client.Produced, error) {
	ranges, err := cl.ListOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	n := len(ranges)
	keyed := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		switch {
		case r.Partition >= 0:
			if int(r.Partition) >= n {
				return nil, fmt.Errorf("produce to topic %s: partition %d does not exist (it has %s)", quoteRes(topic), r.Partition, plural(int64(n), "partition"))
			}
			kr.Partition = r.Partition
		case r.Key != nil:
			kr.Partition = int32(keyed.Partition(kr, n))
		default:
			t.rr++
			kr.Partition = int32(t.rr % n)
		}
		krs[i] = kr
	}
	errs := make([]error, len(krs))
	var wg sync.WaitGroup
	wg.Add(len(krs))
	for i, kr := range krs {
		t.cl.Produce(ctx, kr, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	out := make([]client.Produced, len(krs))
	for i, kr := range krs {
		if errs[i] != nil {
			return nil, kafkaErr(fmt.Sprintf("produce to topic %s in transaction %s", quoteRes(topic), quoteRes(t.id)), errs[i], "")
		}
		out[i] = client.Produced{Partition: kr.Partition, Offset: kr.Offset, Timestamp: kr.Timestamp}
	}
	return out, nil
}

func (t *txn) abort(ctx context.Context) {
	_ = t.cl.AbortBufferedRecords(ctx)
	_ = t.cl.EndTransaction(ctx, kgo.TryAbort)
	t.cl.Close()
}

func (s *Session) endTxn(ctx context.Context, commit bool) error {
	if s.txn == nil {
		return errors.New("no transaction is open (BEGIN TRANSACTION first)")
	}
	t := s.txn
	s.txn = nil
	defer t.cl.Close()
	how, verb := kgo.TryAbort, "aborted"
	if commit {
		how, verb = kgo.TryCommit, "committed"
		if err := t.cl.Flush(ctx); err != nil {
			return kafkaErr("commit transaction "+quoteRes(t.id), err, "")
		}
	} else {
		_ = t.cl.AbortBufferedRecords(ctx)
	}
	if err := t.cl.EndTransaction(ctx, how); err != nil {
		return kafkaErr(strings.TrimSuffix(verb, "ed")+" transaction "+quoteRes(t.id), err, "")
	}
	s.out.OK(fmt.Sprintf("transaction %s %s", quoteRes(t.id), verb))
	return nil
}

// ---- Users ----

func scramMechanism(m *Str) (kadm.ScramMechanism, error) {
	if m == nil {
		return kadm.ScramSha256, nil
	}
	switch strings.ToUpper(string(*m)) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("unknown mechanism %s (want 'SCRAM-SHA-256' or 'SCRAM-SHA-512')", Quote(string(*m)))
}

func (s *Session) createUser(ctx context.Context, cl *client.Client, st *CreateUser) error {
	mech, err := scramMechanism(st.Mechanism)
	if err != nil {
		return err
	}
	if err := s.require(ctx, cl, featUsers); err != nil {
		return fmt.Errorf("CREATE USER: %w", err)
	}
	user := string(st.Name)
	op := "create user " + quoteRes(user)
	res, err := cl.Admin().AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: user, Mechanism: mech, Iterations: 8192, Password: string(st.Password),
	}})
	if err != nil {
		return kafkaErr(op, err, "")
	}
	if r, ok := res[user]; ok && r.Err != nil {
		return kafkaErr(op, r.Err, r.ErrMessage)
	}
	s.out.OK(fmt.Sprintf("user %s created (%s)", quoteRes(user), mech))
	return nil
}

func (s *Session) dropUser(ctx context.Context, cl *client.Client, st *DropUser) error {
	if err := s.require(ctx, cl, featUsers); err != nil {
		return fmt.Errorf("DROP USER: %w", err)
	}
	user := string(st.Name)
	op := "drop user " + quoteRes(user)
	var mechs []kadm.ScramMechanism
	if st.Mechanism != nil {
		m, err := scramMechanism(st.Mechanism)
		if err != nil {
			return err
		}
		mechs = append(mechs, m)
	} else {
		desc, err := cl.Admin().DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return kafkaErr(op, err, "")
		}
		d, ok := desc[user]
		if !ok || errors.Is(d.Err, kerr.ResourceNotFound) || (d.Err == nil && len(d.CredInfos) == 0) {
			return fmt.Errorf("%s: user %s does not exist: %w", op, quoteRes(user), client.ErrNotFound)
		}
		if d.Err != nil {
			return kafkaErr(op, d.Err, d.ErrMessage)
		}
		for _, ci := range d.CredInfos {
			mechs = append(mechs, ci.Mechanism)
		}
	}
	del := make([]kadm.DeleteSCRAM, len(mechs))
	for i, m := range mechs {
		del[i] = kadm.DeleteSCRAM{User: user, Mechanism: m}
	}
	res, err := cl.Admin().AlterUserSCRAMs(ctx, del, nil)
	if err != nil {
		return kafkaErr(op, err, "")
	}
	if r, ok := res[user]; ok && r.Err != nil {
		return kafkaErr(op, r.Err, r.ErrMessage)
	}
	s.out.OK(fmt.Sprintf("user %s dropped", quoteRes(user)))
	return nil
}

func (s *Session) showUsers(ctx context.Context, cl *client.Client) error {
	if err := s.require(ctx, cl, featUsers); err != nil {
		return fmt.Errorf("SHOW USERS: %w", err)
	}
	desc, err := cl.Admin().DescribeUserSCRAMs(ctx)
	if err != nil {
		return kafkaErr("list users", err, "")
	}
	t := &Table{Columns: []string{"user", "mechanism", "iterations"}}
	for _, d := range desc.Sorted() {
		if d.Err != nil {
			return kafkaErr("list users", d.Err, d.ErrMessage)
		}
		for _, ci := range d.CredInfos {
			t.Rows = append(t.Rows, []any{d.User, ci.Mechanism.String(), int64(ci.Iterations)})
		}
	}
	s.out.Table(t)
	return nil
}

// ---- ACLs ----

var aclOpValues = map[string]kadm.ACLOperation{
	"ALL": kadm.OpAll, "READ": kadm.OpRead, "WRITE": kadm.OpWrite, "CREATE": kadm.OpCreate,
	"DELETE": kadm.OpDelete, "ALTER": kadm.OpAlter, "DESCRIBE": kadm.OpDescribe,
	"CLUSTER_ACTION": kadm.OpClusterAction, "DESCRIBE_CONFIGS": kadm.OpDescribeConfigs,
	"ALTER_CONFIGS": kadm.OpAlterConfigs, "IDEMPOTENT_WRITE": kadm.OpIdempotentWrite,
}

// principal adds Kafka's "User:" prefix to a bare user name.
func principal(p string) string {
	if strings.Contains(p, ":") {
		return p
	}
	return "User:" + p
}

func (s *Session) grant(ctx context.Context, cl *client.Client, ops []Name, res *Resource, who string, allow bool) error {
	what := "GRANT"
	if !allow {
		what = "REVOKE"
	}
	if err := s.require(ctx, cl, featACLs); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	b := kadm.NewACLs().Allow(principal(who))
	var kops []kadm.ACLOperation
	var names []string
	for _, o := range ops {
		op, ok := aclOpValues[strings.ToUpper(string(o))]
		if !ok {
			return fmt.Errorf("unknown ACL operation %s", o)
		}
		kops = append(kops, op)
		names = append(names, strings.ToUpper(string(o)))
	}
	b.Operations(kops...)
	pattern := kadm.ACLPatternLiteral
	if res.Prefixed {
		pattern = kadm.ACLPatternPrefixed
	}
	b.ResourcePatternType(pattern)
	target := "the cluster"
	switch {
	case res.Cluster:
		b.Clusters()
	case res.Kind == "TOPIC":
		b.Topics(string(res.Name))
		target = "topic " + quoteRes(string(res.Name))
	default:
		b.Groups(string(res.Name))
		target = "group " + quoteRes(string(res.Name))
	}
	if res.Prefixed {
		target += " (prefix)"
	}
	if allow {
		b.AllowHosts() // any host
		rs, err := cl.Admin().CreateACLs(ctx, b)
		if err != nil {
			return kafkaErr("grant", err, "")
		}
		for _, r := range rs {
			if r.Err != nil {
				return kafkaErr("grant", r.Err, r.ErrMessage)
			}
		}
		s.out.OK(fmt.Sprintf("granted %s on %s to %s", strings.Join(names, ", "), target, principal(who)))
		return nil
	}
	b.AllowHosts()
	rs, err := cl.Admin().DeleteACLs(ctx, b)
	if err != nil {
		return kafkaErr("revoke", err, "")
	}
	n := 0
	for _, r := range rs {
		if r.Err != nil {
			return kafkaErr("revoke", r.Err, r.ErrMessage)
		}
		n += len(r.Deleted)
	}
	s.out.OK(fmt.Sprintf("revoked %s on %s from %s (%s removed)", strings.Join(names, ", "), target, principal(who), plural(int64(n), "ACL")))
	return nil
}

func (s *Session) showAcls(ctx context.Context, cl *client.Client, st *ShowAcls) error {
	if err := s.require(ctx, cl, featACLs); err != nil {
		return fmt.Errorf("SHOW ACLS: %w", err)
	}
	b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).AllowHosts().DenyHosts()
	if st.Principal != nil {
		b.Allow(principal(string(*st.Principal))).Deny(principal(string(*st.Principal)))
	} else {
		b.Allow().Deny()
	}
	rs, err := cl.Admin().DescribeACLs(ctx, b)
	if err != nil {
		return kafkaErr("list ACLs", err, "")
	}
	type row struct{ principal, host, typ, name, pattern, op, perm string }
	seen := map[row]bool{}
	var rows []row
	for _, r := range rs {
		if r.Err != nil {
			return kafkaErr("list ACLs", r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			rw := row{d.Principal, d.Host, strings.ToLower(d.Type.String()), d.Name,
				strings.ToLower(d.Pattern.String()), strings.ToUpper(d.Operation.String()), strings.ToLower(d.Permission.String())}
			if !seen[rw] {
				seen[rw] = true
				rows = append(rows, rw)
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		return fmt.Sprint(a) < fmt.Sprint(b)
	})
	t := &Table{Columns: []string{"principal", "host", "resource", "name", "pattern", "operation", "permission"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []any{r.principal, r.host, r.typ, r.name, r.pattern, r.op, r.perm})
	}
	s.out.Table(t)
	return nil
}

// ---- Cluster ----

func (s *Session) showBrokers(ctx context.Context, cl *client.Client) error {
	info, err := cl.Cluster(ctx)
	if err != nil {
		return err
	}
	t := &Table{Columns: []string{"id", "host", "port", "rack", "controller"}}
	for _, b := range info.Brokers {
		var rack any
		if b.Rack != "" {
			rack = b.Rack
		}
		t.Rows = append(t.Rows, []any{int64(b.ID), b.Host, int64(b.Port), rack, b.ID == info.Controller})
	}
	s.out.Table(t)
	return nil
}

func (s *Session) showCluster(ctx context.Context, cl *client.Client) error {
	info, err := cl.Cluster(ctx)
	if err != nil {
		return err
	}
	var id, ctrl any
	if info.ID != "" {
		id = info.ID
	}
	if info.Controller >= 0 {
		ctrl = int64(info.Controller)
	}
	t := &Table{Columns: []string{"cluster_id", "controller", "brokers"}, Rows: [][]any{{id, ctrl, int64(len(info.Brokers))}}}
	s.out.Table(t)
	return nil
}

func (s *Session) movePartition(ctx context.Context, cl *client.Client, st *MovePartition) error {
	if err := s.require(ctx, cl, featReassign); err != nil {
		return fmt.Errorf("MOVE PARTITION: %w", err)
	}
	topic, p := string(st.Topic), int32(st.Partition)
	brokers := make([]int32, len(st.Brokers))
	for i, b := range st.Brokers {
		brokers[i] = int32(b)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, brokers)
	op := fmt.Sprintf("move partition %s/%d", quoteRes(topic), p)
	res, err := cl.Admin().AlterPartitionAssignments(ctx, req)
	if err != nil {
		return kafkaErr(op, err, "")
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			return kafkaErr(op, r.Err, r.ErrMessage)
		}
	}
	s.out.OK(fmt.Sprintf("reassigning %s[%d] to brokers %v", topic, p, brokers))
	return nil
}

func (s *Session) showReassignments(ctx context.Context, cl *client.Client) error {
	if err := s.require(ctx, cl, featReassign); err != nil {
		return fmt.Errorf("SHOW REASSIGNMENTS: %w", err)
	}
	res, err := cl.Admin().ListPartitionReassignments(ctx, nil)
	if err != nil {
		return kafkaErr("list reassignments", err, "")
	}
	t := &Table{Columns: []string{"topic", "partition", "replicas", "adding", "removing"}}
	for _, r := range res.Sorted() {
		t.Rows = append(t.Rows, []any{r.Topic, int64(r.Partition), r.Replicas, r.AddingReplicas, r.RemovingReplicas})
	}
	s.out.Table(t)
	return nil
}
