package kafka_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/node"
)

// startGroupServer runs a node whose group coordinator has cfg.
func startGroupServer(t *testing.T, cfg group.Config) *server {
	t.Helper()
	return startServer(t, node.Config{Groups: cfg})
}

func TestFindCoordinatorBatchedKeys(t *testing.T) {
	s := startGroupServer(t, group.Config{})
	rc := dialRaw(t, s)
	host, portStr, err := net.SplitHostPort(s.Addr().String()) // advertised: the bound address
	require.NoError(t, err)

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{"g1", "g2"}
	rc.send(req)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	rc.recv(resp)
	require.Len(t, resp.Coordinators, 2)
	for i, c := range resp.Coordinators {
		require.Equal(t, req.CoordinatorKeys[i], c.Key)
		require.Zero(t, c.ErrorCode)
		require.Equal(t, int32(1), c.NodeID)
		require.Equal(t, host, c.Host)
		require.Equal(t, portStr, strconv.Itoa(int(c.Port)))
	}

	old := kmsg.NewPtrFindCoordinatorRequest()
	old.Version, old.CoordinatorKey = 0, "g1"
	rc.send(old)
	oresp := old.ResponseKind().(*kmsg.FindCoordinatorResponse)
	rc.recv(oresp)
	require.Zero(t, oresp.ErrorCode)
	require.Equal(t, int32(1), oresp.NodeID)

	bad := kmsg.NewPtrFindCoordinatorRequest()
	bad.Version, bad.CoordinatorType, bad.CoordinatorKeys = 4, 7, []string{"x"}
	rc.send(bad)
	bresp := bad.ResponseKind().(*kmsg.FindCoordinatorResponse)
	rc.recv(bresp)
	require.ErrorIs(t, kerr.ErrorForCode(bresp.Coordinators[0].ErrorCode), kerr.InvalidRequest)
	require.Equal(t, int32(-1), bresp.Coordinators[0].NodeID)
}

func findCoordinator(t *testing.T, rc *rawConn) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, []string{"g"}
	rc.send(req)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	rc.recv(resp)
	require.Zero(t, resp.Coordinators[0].ErrorCode)
}

// A JoinGroup waiting for its rebalance is parked: requests sent after it
// on the same connection take effect at once, and their responses follow
// the join's in order.
func TestJoinGroupParksWithoutBlockingTheReadLoop(t *testing.T) {
	s := startGroupServer(t, group.Config{MinSessionTimeout: 100 * time.Millisecond, InitialRebalanceDelay: 1500 * time.Millisecond})
	createTopic(t, s, "t", 1)
	rc := dialRaw(t, s)
	findCoordinator(t, rc)

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 9
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g", 5000, 5000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta")}}
	rc.send(join)
	jresp := join.ResponseKind().(*kmsg.JoinGroupResponse)
	rc.recv(jresp)
	require.ErrorIs(t, kerr.ErrorForCode(jresp.ErrorCode), kerr.MemberIDRequired)
	join.MemberID = jresp.MemberID
	joinCorr := rc.send(join) // parks for the initial rebalance delay

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "other", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 42
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	commitCorr := rc.send(commit)

	// Another connection sees the commit while the join is still parked.
	other := dialRaw(t, s)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "other", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}}
	require.Eventually(t, func() bool {
		other.send(fetch)
		fresp := fetch.ResponseKind().(*kmsg.OffsetFetchResponse)
		other.recv(fresp)
		return fresp.Groups[0].Topics[0].Partitions[0].Offset == 42
	}, time.Second, 10*time.Millisecond, "the commit behind the parked join took effect")

	jresp = join.ResponseKind().(*kmsg.JoinGroupResponse)
	require.Equal(t, joinCorr, rc.recv(jresp), "the join is answered first")
	require.Zero(t, jresp.ErrorCode)
	require.Equal(t, int32(1), jresp.Generation)
	require.Equal(t, jresp.MemberID, jresp.LeaderID)
	cresp := commit.ResponseKind().(*kmsg.OffsetCommitResponse)
	require.Equal(t, commitCorr, rc.recv(cresp))
	require.Zero(t, cresp.Topics[0].Partitions[0].ErrorCode)
}

func TestOffsetFetchManyGroupsAndOldVersions(t *testing.T) {
	s := startGroupServer(t, group.Config{})
	createTopic(t, s, "t", 2)
	rc := dialRaw(t, s)
	findCoordinator(t, rc)
	for _, g := range []struct {
		group  string
		offset int64
	}{{"a", 10}, {"b", 20}} {
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.Version, commit.Group, commit.Generation = 2, g.group, -1
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = "t"
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.Metadata = 1, g.offset, kmsg.StringPtr("md-"+g.group)
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		rc.send(commit)
		cresp := commit.ResponseKind().(*kmsg.OffsetCommitResponse)
		rc.recv(cresp)
		require.Zero(t, cresp.Topics[0].Partitions[0].ErrorCode)
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "a"}, {Group: "b"}, {Group: "none"}} // null topics: everything
	rc.send(fetch)
	fresp := fetch.ResponseKind().(*kmsg.OffsetFetchResponse)
	rc.recv(fresp)
	require.Len(t, fresp.Groups, 3)
	require.Equal(t, int64(10), fresp.Groups[0].Topics[0].Partitions[0].Offset)
	require.Equal(t, "md-a", *fresp.Groups[0].Topics[0].Partitions[0].Metadata)
	require.Equal(t, int64(20), fresp.Groups[1].Topics[0].Partitions[0].Offset)
	require.Empty(t, fresp.Groups[2].Topics)
	require.Zero(t, fresp.Groups[2].ErrorCode)

	v1 := kmsg.NewPtrOffsetFetchRequest()
	v1.Version, v1.Group = 1, "b"
	v1.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	rc.send(v1)
	r1 := v1.ResponseKind().(*kmsg.OffsetFetchResponse)
	rc.recv(r1)
	require.Equal(t, int64(-1), r1.Topics[0].Partitions[0].Offset)
	require.Equal(t, int64(20), r1.Topics[0].Partitions[1].Offset)
}

func TestLeaveGroupBatchedAndDescribeVersions(t *testing.T) {
	s := startGroupServer(t, group.Config{MinSessionTimeout: 100 * time.Millisecond, InitialRebalanceDelay: 300 * time.Millisecond})
	rc := dialRaw(t, s)
	findCoordinator(t, rc)
	// Two static members join in the same (initial) rebalance.
	joins := map[string]*kmsg.JoinGroupRequest{}
	conns := map[string]*rawConn{}
	for _, iid := range []string{"x", "y"} {
		join := kmsg.NewPtrJoinGroupRequest()
		join.Version = 5
		join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g", 30000, 30000, "consumer"
		join.InstanceID = kmsg.StringPtr(iid)
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
		joins[iid], conns[iid] = join, dialRaw(t, s)
		conns[iid].send(join)
	}
	members := map[string]string{}
	for iid, join := range joins {
		jresp := join.ResponseKind().(*kmsg.JoinGroupResponse)
		conns[iid].recv(jresp)
		require.Zero(t, jresp.ErrorCode)
		require.Equal(t, int32(1), jresp.Generation)
		members[iid] = jresp.MemberID
	}

	describe := func(version int16, groups ...string) *kmsg.DescribeGroupsResponse {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = version, groups
		rc.send(req)
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		rc.recv(resp)
		return resp
	}
	d := describe(5, "g", "nope")
	require.Len(t, d.Groups[0].Members, 2)
	require.Zero(t, d.Groups[1].ErrorCode, "before v6 an unknown group is just Dead")
	require.Equal(t, "Dead", d.Groups[1].State)
	d = describe(6, "nope")
	require.ErrorIs(t, kerr.ErrorForCode(d.Groups[0].ErrorCode), kerr.GroupIDNotFound)
	require.NotNil(t, d.Groups[0].ErrorMessage)

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 4, "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{
		{InstanceID: kmsg.StringPtr("x")},
		{MemberID: "wrong", InstanceID: kmsg.StringPtr("y")},
		{MemberID: members["y"], InstanceID: kmsg.StringPtr("y")},
		{MemberID: "unknown"},
	}
	rc.send(leave)
	lresp := leave.ResponseKind().(*kmsg.LeaveGroupResponse)
	rc.recv(lresp)
	require.Zero(t, lresp.ErrorCode)
	codes := []error{}
	for _, m := range lresp.Members {
		codes = append(codes, kerr.ErrorForCode(m.ErrorCode))
	}
	require.Equal(t, []error{nil, kerr.FencedInstanceID, nil, kerr.UnknownMemberID}, codes)
	require.Empty(t, describe(5, "g").Groups[0].Members)

	list := kmsg.NewPtrListGroupsRequest()
	list.Version, list.StatesFilter = 5, []string{"Empty"}
	rc.send(list)
	ls := list.ResponseKind().(*kmsg.ListGroupsResponse)
	rc.recv(ls)
	require.Len(t, ls.Groups, 1)
	require.Equal(t, "g", ls.Groups[0].Group)
	require.Equal(t, "classic", ls.Groups[0].GroupType)
}

// A Metadata request naming __consumer_offsets creates it, as Kafka does,
// even with auto-creation off: lag monitors (Burrow) read it before any
// group exists. One that forbids creation (v4+) or names another unknown
// topic creates nothing.
func TestMetadataCreatesTheOffsetsTopic(t *testing.T) {
	s := startGroupServer(t, group.Config{})
	rc := dialRaw(t, s)
	metadata := func(allow bool, names ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 12, allow
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		rc.send(req)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		rc.recv(resp)
		return resp
	}

	resp := metadata(false, group.OffsetsTopic)
	require.ErrorIs(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode), kerr.UnknownTopicOrPartition,
		"a request that forbids creation creates nothing")

	resp = metadata(true, group.OffsetsTopic, "nope")
	require.Len(t, resp.Topics, 2)
	offsets, other := resp.Topics[0], resp.Topics[1]
	require.Zero(t, offsets.ErrorCode)
	require.Equal(t, group.OffsetsTopic, *offsets.Topic)
	require.True(t, offsets.IsInternal)
	require.Len(t, offsets.Partitions, 3, "created with the coordinator's partition count")
	require.ErrorIs(t, kerr.ErrorForCode(other.ErrorCode), kerr.UnknownTopicOrPartition,
		"auto-creation is off for ordinary topics")

	// The coordinator took the topic as its own: groups work at once.
	findCoordinator(t, rc)
}
