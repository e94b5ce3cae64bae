package group

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord"
	"github.com/moonmq/moonmq/engine/coord/coordtest"
)

// TestDataDriven runs the scenarios in testdata/datadriven/: a Coordinator over an
// in-memory offsets topic (4 partitions, topics t with 3 partitions and u
// with 1) with a fake clock, driven by commands; each command prints the
// replies it completed and the records it appended (coordtest.Harness).
// Run with -rewrite to regenerate the expected output after a deliberate
// change, and read the diff.
//
// Commands (arguments are key=value; lists are comma-separated):
//
//	join group= member= [instance=] [version=9] [meta=] [session=10s] [rebalance=20s] [protocols=range]
//	sync group= member= gen= [instance=] [assign=member:bytes,...]
//	heartbeat group= member= gen= [instance=]
//	leave group= member= [instance=]
//	consumer-heartbeat group= member= epoch= [topics=t,u] [assignor=] [owned=t:0.1,u:0]
//	  (owned defaults to what the member was last assigned, as a client acknowledges)
//	commit group= offsets=t/0=5,... [member=] [gen=-1] [version=8]
//	txn-commit group= offsets=t/0=5,... [pid=7] [epoch=0] [member=] [gen=-1]
//	  (a TxnOffsetCommit in producer pid's transaction)
//	marker group= [pid=7] [epoch=0] [result=commit|abort]
//	  (the transaction's end-transaction marker on the group's offsets partition)
//	fetch-offsets group= [stable=true]
//	delete-offsets group= parts=t/0,u/0   (OffsetDelete)
//	delete-group group=
//	describe group=
//	list
//	tick <duration>       advance the clock, then run the timers once
//	restart               close the coordinator and replay the records written so far
//	fail-reads group=     make reads of the group's offsets partition fail (restore-reads: work again)
//	recheck               retry the partitions that could not be replayed
//	unload group= / load group=   leadership of the group's offsets partition moves away / back
//
// Adding another state machine (a transaction coordinator over
// __transaction_state, or replication of a shard to followers): build its
// coordinator on engine/coord over a coordtest.MemLog, write a harness like
// this one around coordtest.Harness (Park each reply, give Harness.Record a
// decoder of its records) with its own commands, and keep restart as
// "close, then start a new runtime over the same MemLog": replay is what
// every coordinator must get right. Replication would add commands that
// move the durable mark (MemLog.SetAutoSync, Sync, Heal) and print what
// followers applied.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/datadriven", func(t *testing.T, path string) {
		h := newDDHarness(t)
		datadriven.RunTest(t, path, h.run)
	})
}

type ddHarness struct {
	t   *testing.T
	log *coordtest.MemLog
	clk *clock
	ids int // member ids handed out, across restarts
	c   *Coordinator
	*coordtest.Harness
	assigned map[string][]TopicPartitions // consumer-group members' last assignment, by group/member
}

func newDDHarness(t *testing.T) *ddHarness {
	h := &ddHarness{t: t, log: coordtest.NewMemLog(), clk: &clock{now: time.Unix(1_000_000, 0)},
		assigned: map[string][]TopicPartitions{}}
	h.Harness = coordtest.NewHarness(h.log, h.record)
	h.start()
	require.NoError(t, h.c.EnsureTopic(t.Context()))
	h.Appended() // nothing, but keeps the first command's output its own
	return h
}

func (h *ddHarness) start() {
	cfg := testConfig()
	cfg.NewID = func() string { h.ids++; return fmt.Sprintf("id%d", h.ids) }
	cfg.Now = h.clk.Now
	cfg.OffsetsTopicPartitions = 4
	cfg.OffsetsRetention = time.Hour
	cfg.RetentionCheckInterval = time.Minute
	cfg.TickInterval, cfg.PartitionRecheckInterval = time.Hour, time.Hour // the commands tick
	c, err := New(cfg, h.log)
	require.NoError(h.t, err)
	c.SetTopics(testTopics)
	c.Start()
	h.t.Cleanup(func() { _ = c.Close() })
	<-c.Loaded()
	h.c = c
}

func (h *ddHarness) run(t *testing.T, td *datadriven.TestData) string {
	a := ddArgs{t: t, td: td}
	group := a.str("group", "g")
	var result string
	switch td.Cmd {
	case "join":
		req := JoinRequest{Group: group, Version: int16(a.int("version", 9)), MemberID: a.str("member", ""),
			InstanceID: a.str("instance", ""), ClientID: "c", ClientHost: "/127.0.0.1",
			SessionTimeout: a.dur("session", 10*time.Second), RebalanceTimeout: a.dur("rebalance", 20*time.Second),
			ProtocolType: "consumer"}
		for _, p := range a.list("protocols", "range") {
			req.Protocols = append(req.Protocols, Protocol{Name: p, Metadata: []byte(a.str("meta", ""))})
		}
		coordtest.Park(h.Harness, "join", h.c.JoinGroup(req), func(r JoinResult, err error) string {
			if err = firstErr(r.Err, err); err != nil {
				return fmt.Sprintf("%s member=%s", errName(err), r.MemberID)
			}
			s := fmt.Sprintf("member=%s gen=%d leader=%s protocol=%s", r.MemberID, r.Generation, r.Leader, r.Protocol)
			if len(r.Members) > 0 {
				var ms []string
				for _, m := range r.Members {
					ms = append(ms, m.MemberID)
				}
				s += " members=" + strings.Join(ms, ",")
			}
			return s
		})
	case "sync":
		req := SyncRequest{Group: group, MemberID: a.str("member", ""), Generation: int32(a.int("gen", -1)),
			InstanceID: a.str("instance", "")}
		for _, kv := range a.list("assign", "") {
			m, v, _ := strings.Cut(kv, ":")
			if req.Assignments == nil {
				req.Assignments = map[string][]byte{}
			}
			req.Assignments[m] = []byte(v)
		}
		coordtest.Park(h.Harness, "sync", h.c.SyncGroup(req), func(r SyncResult, err error) string {
			if err = firstErr(r.Err, err); err != nil {
				return errName(err)
			}
			return fmt.Sprintf("assignment=%q", r.Assignment)
		})
	case "heartbeat":
		coordtest.Park(h.Harness, "heartbeat", h.c.Heartbeat(HeartbeatRequest{Group: group, MemberID: a.str("member", ""),
			Generation: int32(a.int("gen", -1)), InstanceID: a.str("instance", "")}), errOnly)
	case "leave":
		coordtest.Park(h.Harness, "leave", h.c.LeaveGroup(group, []LeaveMember{{MemberID: a.str("member", ""), InstanceID: a.str("instance", "")}}),
			func(r LeaveResult, err error) string {
				if err = firstErr(r.Err, err); err != nil {
					return errName(err)
				}
				return errName(r.Members[0])
			})
	case "consumer-heartbeat":
		member := a.str("member", "")
		req := ConsumerHeartbeatRequest{Group: group, Version: 1, MemberID: member, MemberEpoch: int32(a.int("epoch", 0)),
			RebalanceTimeout: time.Second, ServerAssignor: a.ptr("assignor")}
		if td.HasArg("topics") {
			req.SubscribedTopicNames = a.list("topics", "")
		}
		req.Owned = h.assigned[group+"/"+member]
		if req.Owned == nil {
			req.Owned = []TopicPartitions{}
		}
		if td.HasArg("owned") {
			req.Owned = h.parseOwned(a.list("owned", ""))
		}
		coordtest.Park(h.Harness, "consumer-heartbeat", h.c.ConsumerHeartbeat(req), func(r ConsumerHeartbeatResult, err error) string {
			if err = firstErr(r.Err, err); err != nil {
				return errName(err)
			}
			s := fmt.Sprintf("member=%s epoch=%d", r.MemberID, r.MemberEpoch)
			if r.HasAssignment {
				h.assigned[group+"/"+r.MemberID] = r.Assignment
				s += " assignment=" + h.formatTPs(r.Assignment)
			}
			return s
		})
	case "commit":
		req := CommitRequest{Group: group, Version: int16(a.int("version", 8)), Generation: int32(a.int("gen", -1)),
			MemberID: a.str("member", "")}
		h.parkCommit("commit", req, a)
	case "txn-commit":
		req := CommitRequest{Group: group, Version: 3, Generation: int32(a.int("gen", -1)), MemberID: a.str("member", ""),
			Producer: &TxnProducer{ID: int64(a.int("pid", 7)), Epoch: int16(a.int("epoch", 0))}}
		h.parkCommit("txn-commit", req, a)
	case "marker":
		p := PartitionFor(group, h.log.Partitions())
		m := coord.Marker{ProducerID: int64(a.int("pid", 7)), Epoch: int16(a.int("epoch", 0)), Commit: a.str("result", "commit") == "commit"}
		coordtest.Park(h.Harness, "marker", h.c.CompleteTransaction(p, m), func(v error, err error) string { return errName(firstErr(v, err)) })
	case "fetch-offsets":
		freq := FetchRequest{Group: group, MemberEpoch: -1, RequireStable: a.str("stable", "") == "true"}
		coordtest.Park(h.Harness, "fetch-offsets", h.c.FetchOffsets(freq), func(r FetchResult, err error) string {
			if err = firstErr(r.Err, err); err != nil {
				return errName(err)
			}
			var out []string
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					if p.Err != nil {
						out = append(out, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, errName(p.Err)))
						continue
					}
					out = append(out, fmt.Sprintf("%s/%d=%d", t.Topic, p.Partition, p.Offset))
				}
			}
			if len(out) == 0 {
				return "none"
			}
			return strings.Join(out, " ")
		})
	case "delete-offsets":
		var topics []FetchTopic
		for _, tp := range a.list("parts", "") {
			topic, part, _ := strings.Cut(tp, "/")
			n, _ := strconv.Atoi(part)
			topics = append(topics, FetchTopic{Topic: topic, Partitions: []int32{int32(n)}})
		}
		coordtest.Park(h.Harness, "delete-offsets", h.c.DeleteOffsets(group, topics), func(r DeleteOffsetsResult, err error) string {
			if err = firstErr(r.Err, err); err != nil {
				return errName(err)
			}
			var out []string
			for i, t := range topics {
				out = append(out, fmt.Sprintf("%s/%d=%s", t.Topic, t.Partitions[0], errName(r.Partitions[i][0])))
			}
			return strings.Join(out, " ")
		})
	case "delete-group":
		coordtest.Park(h.Harness, "delete-group", h.c.DeleteGroups([]string{group})[0], errOnly)
	case "describe":
		result = h.describe(group)
	case "list":
		ls, err := h.c.ListGroups(nil, nil)
		if err != nil {
			result = errName(err)
			break
		}
		for _, l := range ls {
			result += fmt.Sprintf("%s type=%s state=%s protocol-type=%s\n", l.Group, l.Type, l.State, l.ProtocolType)
		}
		if result == "" {
			result = "no groups"
		}
	case "tick":
		if len(td.CmdArgs) != 1 {
			td.Fatalf(t, "tick <duration>")
		}
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		if err != nil {
			td.Fatalf(t, "tick: %v", err)
		}
		h.c.Tick(h.clk.add(d))
	case "fail-reads":
		h.log.FailReads(PartitionFor(group, 4), errors.New("bad sector"))
	case "restore-reads":
		h.log.FailReads(-1, nil)
	case "recheck":
		h.c.rt.Recheck()
	case "unload":
		h.c.UnloadPartition(PartitionFor(group, 4))
	case "load":
		if err := h.c.LoadPartition(PartitionFor(group, 4)); err != nil {
			result = errName(err)
		}
	case "restart":
		require.NoError(t, h.c.Close())
		result = h.Completed() // what the close answered
		h.start()
		if p := h.Pending(); len(p) > 0 {
			td.Fatalf(t, "replies still parked after the close: %v", p)
		}
	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	return h.Output(result)
}

// parkCommit fills req with the offsets= argument (topic/partition=offset,
// ...) and parks the commit under name, printing each partition's answer.
func (h *ddHarness) parkCommit(name string, req CommitRequest, a ddArgs) {
	for _, kv := range a.list("offsets", "") {
		tp, off, _ := strings.Cut(kv, "=")
		topic, part, _ := strings.Cut(tp, "/")
		o, _ := strconv.ParseInt(off, 10, 64)
		p, _ := strconv.Atoi(part)
		i := slices.IndexFunc(req.Topics, func(ct CommitTopic) bool { return ct.Topic == topic })
		if i < 0 {
			req.Topics, i = append(req.Topics, CommitTopic{Topic: topic}), len(req.Topics)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, CommitPartition{Partition: int32(p), Offset: o, LeaderEpoch: -1, Timestamp: -1})
	}
	coordtest.Park(h.Harness, name, h.c.CommitOffsets(req), func(errs [][]error, err error) string {
		var out []string
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				e := err
				if len(errs) > i && errs[i][j] != nil {
					e = errs[i][j]
				}
				out = append(out, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, errName(e)))
			}
		}
		return strings.Join(out, " ")
	})
}

func (h *ddHarness) describe(group string) string {
	if d := h.c.ConsumerGroupDescribe([]string{group})[0]; d.Err == nil {
		s := fmt.Sprintf("%s consumer state=%s epoch=%d assignment-epoch=%d assignor=%s\n", group, d.State, d.Epoch, d.AssignmentEpoch, d.Assignor)
		for _, m := range d.Members {
			s += fmt.Sprintf("  %s epoch=%d assignment=%s target=%s\n", m.MemberID, m.MemberEpoch, h.formatTPs(m.Assignment), h.formatTPs(m.TargetAssignment))
		}
		return s
	}
	d := h.c.DescribeGroups([]string{group})[0]
	if d.Err != nil {
		return fmt.Sprintf("%s %s state=%s", group, errName(d.Err), d.State)
	}
	s := fmt.Sprintf("%s classic state=%s protocol-type=%s protocol=%s\n", group, d.State, d.ProtocolType, d.Protocol)
	for _, m := range d.Members {
		s += fmt.Sprintf("  %s instance=%s assignment=%q\n", m.MemberID, m.InstanceID, m.Assignment)
	}
	return s
}

// record prints one __consumer_offsets record.
func (h *ddHarness) record(_ int32, r batch.Record) string {
	rec, known, err := decodeRecord(r.Key, r.Value)
	switch {
	case err != nil:
		return "undecodable: " + err.Error()
	case !known:
		return "unknown record"
	case rec.isGroup && rec.metadata == nil:
		return fmt.Sprintf("group %s deleted", rec.group)
	case rec.isGroup:
		m := rec.metadata
		var members []string
		for _, mv := range m.Members {
			members = append(members, fmt.Sprintf("%s(%q)", mv.MemberID, mv.Assignment))
		}
		proto, leader := "", ""
		if m.Protocol != nil {
			proto = *m.Protocol
		}
		if m.Leader != nil {
			leader = *m.Leader
		}
		return fmt.Sprintf("group %s gen=%d protocol=%s leader=%s members=[%s]", rec.group, m.Generation, proto, leader, strings.Join(members, " "))
	case rec.offset == nil:
		return fmt.Sprintf("offset %s %s/%d deleted", rec.group, rec.topic, rec.partition)
	}
	return fmt.Sprintf("offset %s %s/%d=%d", rec.group, rec.topic, rec.partition, rec.offset.offset)
}

// formatTPs prints an assignment by topic name: t:0.1.2,u:0.
func (h *ddHarness) formatTPs(tps []TopicPartitions) string {
	var out []string
	for _, tp := range tps {
		var ps []string
		for _, p := range slices.Sorted(slices.Values(tp.Partitions)) {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		out = append(out, h.c.TopicName(tp.ID)+":"+strings.Join(ps, "."))
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

func (h *ddHarness) parseOwned(items []string) []TopicPartitions {
	out := []TopicPartitions{}
	for _, it := range items {
		topic, parts, _ := strings.Cut(it, ":")
		id, ok := h.c.TopicID(topic)
		require.True(h.t, ok, "unknown topic %q", topic)
		tp := TopicPartitions{ID: id}
		for _, p := range strings.Split(parts, ".") {
			n, err := strconv.Atoi(p)
			require.NoError(h.t, err)
			tp.Partitions = append(tp.Partitions, int32(n))
		}
		out = append(out, tp)
	}
	return out
}

func errOnly(own, err error) string { return errName(firstErr(own, err)) }

func firstErr(own, wait error) error {
	if wait != nil {
		return wait
	}
	return own
}

// ddErrors names the sentinels as Kafka's error codes do.
var ddErrors = []struct {
	err  error
	name string
}{
	{ErrCoordinatorLoadInProgress, "COORDINATOR_LOAD_IN_PROGRESS"}, {ErrCoordinatorNotAvailable, "COORDINATOR_NOT_AVAILABLE"},
	{ErrUnstableOffsetCommit, "UNSTABLE_OFFSET_COMMIT"},
	{ErrNotCoordinator, "NOT_COORDINATOR"}, {ErrInvalidGroupID, "INVALID_GROUP_ID"}, {ErrUnknownMemberID, "UNKNOWN_MEMBER_ID"},
	{ErrMemberIDRequired, "MEMBER_ID_REQUIRED"}, {ErrIllegalGeneration, "ILLEGAL_GENERATION"},
	{ErrRebalanceInProgress, "REBALANCE_IN_PROGRESS"}, {ErrInconsistentGroupProtocol, "INCONSISTENT_GROUP_PROTOCOL"},
	{ErrInvalidSessionTimeout, "INVALID_SESSION_TIMEOUT"}, {ErrGroupMaxSizeReached, "GROUP_MAX_SIZE_REACHED"},
	{ErrFencedInstanceID, "FENCED_INSTANCE_ID"}, {ErrGroupIDNotFound, "GROUP_ID_NOT_FOUND"}, {ErrNonEmptyGroup, "NON_EMPTY_GROUP"},
	{ErrGroupSubscribedToTopic, "GROUP_SUBSCRIBED_TO_TOPIC"}, {ErrOffsetMetadataTooLarge, "OFFSET_METADATA_TOO_LARGE"},
	{ErrInvalidCommitOffsetSize, "INVALID_COMMIT_OFFSET_SIZE"}, {ErrGroupMetadataTooLarge, "UNKNOWN_SERVER_ERROR"},
	{ErrFencedMemberEpoch, "FENCED_MEMBER_EPOCH"}, {ErrStaleMemberEpoch, "STALE_MEMBER_EPOCH"},
	{ErrUnreleasedInstanceID, "UNRELEASED_INSTANCE_ID"}, {ErrUnsupportedAssignor, "UNSUPPORTED_ASSIGNOR"},
	{ErrInvalidRegex, "INVALID_REGULAR_EXPRESSION"}, {ErrInvalidRequest, "INVALID_REQUEST"},
	{ErrUnsupportedVersion, "UNSUPPORTED_VERSION"}, {ErrUnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION"},
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	for _, e := range ddErrors {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return "error: " + err.Error()
}

// ddArgs reads a command's key=value arguments.
type ddArgs struct {
	t  *testing.T
	td *datadriven.TestData
}

func (a ddArgs) str(key, def string) string {
	arg, ok := a.td.Arg(key)
	if !ok {
		return def
	}
	if len(arg.Vals) == 0 {
		return ""
	}
	return strings.Join(arg.Vals, ",")
}

func (a ddArgs) ptr(key string) *string {
	if !a.td.HasArg(key) {
		return nil
	}
	s := a.str(key, "")
	return &s
}

func (a ddArgs) list(key, def string) []string {
	s := a.str(key, def)
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (a ddArgs) int(key string, def int) int { return parseArg(a, key, def, strconv.Atoi) }

func (a ddArgs) dur(key string, def time.Duration) time.Duration {
	return parseArg(a, key, def, time.ParseDuration)
}

// parseArg is argument key parsed, def when it is absent.
func parseArg[T any](a ddArgs, key string, def T, parse func(string) (T, error)) T {
	s := a.str(key, "")
	if s == "" {
		return def
	}
	v, err := parse(s)
	if err != nil {
		a.td.Fatalf(a.t, "%s: %v", key, err)
	}
	return v
}
