package kafka_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/node"
)

// The ACL matrix, per API family, with real franz-go clients acting as
// chosen principals. A principal is chosen by the client's source
// address: each has a loopback address of its own (127.0.0.N), and the
// server's test hook (SetPrincipalOf) names the principal of a
// connection by it, standing in for SASL. The address is also the host
// ACLs match. Connections from 127.0.0.1 (the helpers' own clients) are
// the super user.

const (
	admin = "User:admin" // the super user
	alice = "User:alice"
	bob   = "User:bob"
)

var principalIPs = map[string]string{admin: "127.0.0.1", alice: "127.0.0.2", bob: "127.0.0.3"}

// aclStore stands in for the controller's ACLs: bindings and a version
// bumped by every change.
type aclStore struct {
	mu sync.Mutex
	bs []acl.Binding
	v  uint64
}

func (a *aclStore) ACLs() ([]acl.Binding, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bs, a.v
}

func (a *aclStore) set(bs ...acl.Binding) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bs, a.v = bs, a.v+1
}

// startAuthzServer runs a node enforcing ACLs from the returned store.
func startAuthzServer(t *testing.T, cfg node.Config) (*server, *aclStore) {
	t.Helper()
	store := &aclStore{}
	cfg.Authz = node.AuthzConfig{Enabled: true, SuperUsers: []string{admin},
		AllowEveryoneIfNoACL: cfg.Authz.AllowEveryoneIfNoACL, ACLs: store.ACLs}
	s := startServer(t, cfg)
	byIP := map[string]string{}
	for p, ip := range principalIPs {
		byIP[ip] = p
	}
	s.k.SetPrincipalOf(func(nc net.Conn) string {
		host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
		if p, ok := byIP[host]; ok {
			return p
		}
		return kafka.AnonymousPrincipal
	})
	return s, store
}

// clientAs is a franz-go client connecting as principal.
func clientAs(t *testing.T, s *server, principal string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(principalIPs[principal])}, Timeout: 10 * time.Second}
	opts = append([]kgo.Opt{kgo.SeedBrokers(s.Addr().String()), kgo.Dialer(d.DialContext),
		kgo.RequestRetries(0), kgo.RetryTimeout(2 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// send sends req straight to the node (no routing, no retries).
func send[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Broker(1).Request(ctx, req)
	require.NoError(t, err)
	return resp.(R)
}

func binding(rt acl.ResourceType, name string, pt acl.PatternType, principal string, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: perm}
}

func produceReq(topic string, value string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordBatch(value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// recordBatch is one plain (not idempotent) record.
func recordBatch(value string) []byte {
	return batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: []byte(value)}})
}

func fetchReq(topic string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = 12, -1, 0, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestAuthzProduceFetch(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{})
	for _, topic := range []string{"orders", "order-audit", "payments"} {
		createTopic(t, s, topic, 1)
	}
	store.set(
		binding(acl.ResourceTopic, "orders", acl.PatternLiteral, alice, acl.OpWrite, acl.PermissionAllow),
		binding(acl.ResourceTopic, "order", acl.PatternPrefixed, alice, acl.OpRead, acl.PermissionAllow),
		binding(acl.ResourceTopic, "*", acl.PatternLiteral, bob, acl.OpAll, acl.PermissionAllow),
		binding(acl.ResourceTopic, "payments", acl.PatternLiteral, bob, acl.OpWrite, acl.PermissionDeny),
	)
	aliceCl, _ := clientAs(t, s, alice)
	bobCl, _ := clientAs(t, s, bob)

	type row struct {
		who   *kgo.Client
		topic string
		want  error
	}
	for _, r := range []row{
		{aliceCl, "orders", nil},
		{aliceCl, "order-audit", kerr.TopicAuthorizationFailed}, // READ only
		{aliceCl, "payments", kerr.TopicAuthorizationFailed},
		{bobCl, "orders", nil},                             // wildcard ALL
		{bobCl, "payments", kerr.TopicAuthorizationFailed}, // DENY overrides the wildcard ALLOW
	} {
		resp := send[*kmsg.ProduceResponse](t, r.who, produceReq(r.topic, "v"))
		require.Equal(t, r.want, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode), "produce to %s", r.topic)
	}
	for _, r := range []row{
		{aliceCl, "orders", nil}, // READ by prefix
		{aliceCl, "order-audit", nil},
		{aliceCl, "payments", kerr.TopicAuthorizationFailed},
		{bobCl, "payments", nil}, // DENY WRITE does not deny READ
	} {
		resp := send[*kmsg.FetchResponse](t, r.who, fetchReq(r.topic))
		require.Equal(t, r.want, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode), "fetch from %s", r.topic)
	}
	// A replica fetch needs CLUSTER_ACTION, which alice lacks.
	rf := fetchReq("orders")
	rf.ReplicaID = 2
	resp := send[*kmsg.FetchResponse](t, aliceCl, rf)
	require.Equal(t, kerr.TopicAuthorizationFailed, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))

	// ListOffsets and OffsetForLeaderEpoch need DESCRIBE (READ implies it).
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 4
	for _, topic := range []string{"orders", "payments"} {
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
		lo.Topics = append(lo.Topics, lt)
	}
	los := send[*kmsg.ListOffsetsResponse](t, aliceCl, lo)
	require.Zero(t, los.Topics[0].Partitions[0].ErrorCode)
	require.EqualValues(t, 2, los.Topics[0].Partitions[0].Offset, "alice's and bob's records")
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, los.Topics[1].Partitions[0].ErrorCode)
	require.EqualValues(t, -1, los.Topics[1].Partitions[0].Offset, "nothing told about a refused topic")

	ofe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ofe.Version, ofe.ReplicaID = 4, -1
	for _, topic := range []string{"orders", "payments"} {
		et := kmsg.NewOffsetForLeaderEpochRequestTopic()
		et.Topic = topic
		ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		ep.LeaderEpoch, ep.CurrentLeaderEpoch = 0, -1
		et.Partitions = append(et.Partitions, ep)
		ofe.Topics = append(ofe.Topics, et)
	}
	ofes := send[*kmsg.OffsetForLeaderEpochResponse](t, aliceCl, ofe)
	require.Zero(t, ofes.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, ofes.Topics[1].Partitions[0].ErrorCode)

	// A stock client end to end: alice's idempotent producer (WRITE on a
	// topic is enough for its producer id) and a consumer.
	prod, _ := clientAs(t, s, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("idempotent")}).FirstErr())
	err := prod.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("x")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	cons, _ := clientAs(t, s, alice, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 3 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.Equal(t, []string{"v", "v", "idempotent"}, got)

	// Someone with no ACL at all may not even get a producer id.
	store.set(binding(acl.ResourceTopic, "orders", acl.PatternLiteral, alice, acl.OpRead, acl.PermissionAllow))
	ipid := send[*kmsg.InitProducerIDResponse](t, bobCl, kmsg.NewPtrInitProducerIDRequest())
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, ipid.ErrorCode)
	ipid = send[*kmsg.InitProducerIDResponse](t, aliceCl, kmsg.NewPtrInitProducerIDRequest())
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, ipid.ErrorCode, "READ is not WRITE")
	store.set(binding(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, bob, acl.OpIdempotentWrite, acl.PermissionAllow))
	ipid = send[*kmsg.InitProducerIDResponse](t, bobCl, kmsg.NewPtrInitProducerIDRequest())
	require.Zero(t, ipid.ErrorCode, "IDEMPOTENT_WRITE on the cluster")
}

func TestAuthzMetadata(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{AutoCreateTopics: true})
	for _, topic := range []string{"orders", "payments", "secret"} {
		createTopic(t, s, topic, 1)
	}
	store.set(
		binding(acl.ResourceTopic, "ord", acl.PatternPrefixed, alice, acl.OpDescribe, acl.PermissionAllow),
		binding(acl.ResourceTopic, "*", acl.PatternLiteral, bob, acl.OpRead, acl.PermissionAllow),
		binding(acl.ResourceTopic, "secret", acl.PatternLiteral, bob, acl.OpDescribe, acl.PermissionDeny),
		binding(acl.ResourceTopic, "bob-", acl.PatternPrefixed, bob, acl.OpCreate, acl.PermissionAllow),
	)
	ctx := context.Background()
	list := func(adm *kadm.Client) []string {
		tds, err := adm.ListTopicsWithInternal(ctx)
		require.NoError(t, err)
		return tds.Names()
	}
	_, aliceAdm := clientAs(t, s, alice)
	_, bobAdm := clientAs(t, s, bob)
	_, adminAdm := clientAs(t, s, admin)
	require.Equal(t, []string{"orders"}, list(aliceAdm))
	require.Equal(t, []string{"orders", "payments"}, list(bobAdm), "DENY DESCRIBE hides secret")
	require.Subset(t, list(adminAdm), []string{"orders", "payments", "secret"}, "the super user sees everything")

	aliceCl, _ := clientAs(t, s, alice)
	meta := func(cl *kgo.Client, topics ...string) map[string]int16 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation, req.IncludeTopicAuthorizedOperations = 12, true, true
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp := send[*kmsg.MetadataResponse](t, cl, req)
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			out[*rt.Topic] = rt.ErrorCode
			if *rt.Topic == "orders" && cl == aliceCl {
				require.Equal(t, int32(1<<acl.OpDescribe), rt.AuthorizedOperations)
			}
		}
		return out
	}
	require.Equal(t, map[string]int16{
		"orders":   0,
		"payments": kerr.TopicAuthorizationFailed.Code,
		"missing":  kerr.TopicAuthorizationFailed.Code, // whether it exists is not told
		"ord-new":  kerr.TopicAuthorizationFailed.Code, // DESCRIBE, but auto-creating needs CREATE
	}, meta(aliceCl, "orders", "payments", "missing", "ord-new"))
	bobCl, _ := clientAs(t, s, bob)
	require.Equal(t, map[string]int16{
		"secret":  kerr.TopicAuthorizationFailed.Code,
		"bob-new": 0, // CREATE by prefix: auto-created
		"other":   kerr.TopicAuthorizationFailed.Code,
	}, meta(bobCl, "secret", "bob-new", "other"))
	_, freshAdm := clientAs(t, s, admin) // franz-go caches Metadata answers for a while
	all := list(freshAdm)
	require.Contains(t, all, "bob-new")
	require.NotContains(t, all, "other")
}

func TestAuthzAdmin(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{})
	createTopic(t, s, "orders", 1)
	store.set(
		binding(acl.ResourceTopic, "alice-", acl.PatternPrefixed, alice, acl.OpAll, acl.PermissionAllow),
		binding(acl.ResourceTopic, "orders", acl.PatternLiteral, alice, acl.OpDescribeConfigs, acl.PermissionAllow),
		binding(acl.ResourceTopic, "orders", acl.PatternLiteral, alice, acl.OpDescribe, acl.PermissionAllow),
		binding(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, bob, acl.OpCreate, acl.PermissionAllow),
		binding(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, bob, acl.OpDescribe, acl.PermissionAllow),
		binding(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, bob, acl.OpDescribeConfigs, acl.PermissionAllow),
	)
	ctx := context.Background()
	_, aliceAdm := clientAs(t, s, alice)
	_, bobAdm := clientAs(t, s, bob)

	// CreateTopics: CREATE on the topic (alice, by prefix) or the cluster (bob).
	cr, err := aliceAdm.CreateTopics(ctx, 1, 1, nil, "alice-1", "other")
	require.NoError(t, err)
	require.NoError(t, cr["alice-1"].Err)
	require.ErrorIs(t, cr["other"].Err, kerr.TopicAuthorizationFailed)
	cr, err = bobAdm.CreateTopics(ctx, 1, 1, nil, "bob-1")
	require.NoError(t, err)
	require.NoError(t, cr["bob-1"].Err)

	// CreatePartitions needs ALTER, DeleteTopics DELETE.
	cp, err := aliceAdm.CreatePartitions(ctx, 1, "alice-1", "orders")
	require.NoError(t, err)
	require.NoError(t, cp["alice-1"].Err)
	require.ErrorIs(t, cp["orders"].Err, kerr.TopicAuthorizationFailed)
	dr, err := bobAdm.DeleteTopics(ctx, "alice-1")
	require.NoError(t, err)
	require.ErrorIs(t, dr["alice-1"].Err, kerr.TopicAuthorizationFailed)
	dr, err = aliceAdm.DeleteTopics(ctx, "alice-1")
	require.NoError(t, err)
	require.NoError(t, dr["alice-1"].Err)

	// Configs: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic; broker
	// configs are the cluster's.
	aliceCl, _ := clientAs(t, s, alice)
	dcr := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{"orders", "bob-1"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
		dcr.Resources = append(dcr.Resources, r)
	}
	dcs := send[*kmsg.DescribeConfigsResponse](t, aliceCl, dcr)
	require.Zero(t, dcs.Resources[0].ErrorCode)
	require.NotEmpty(t, dcs.Resources[0].Configs)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, dcs.Resources[1].ErrorCode)
	require.Empty(t, dcs.Resources[1].Configs)
	_, err = aliceAdm.DescribeBrokerConfigs(ctx, 1)
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed)
	_, err = bobAdm.DescribeBrokerConfigs(ctx, 1)
	require.NoError(t, err)
	ac, err := aliceAdm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}, "orders")
	require.NoError(t, err)
	require.ErrorIs(t, ac[0].Err, kerr.TopicAuthorizationFailed, "DESCRIBE_CONFIGS does not allow ALTER_CONFIGS")

	// DescribeLogDirs needs DESCRIBE on the cluster; DescribeCluster
	// tells the authorized operations only to those who may describe it.
	_, err = aliceAdm.DescribeAllLogDirs(ctx, nil)
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed)
	_, err = bobAdm.DescribeAllLogDirs(ctx, nil)
	require.NoError(t, err)
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	require.Zero(t, send[*kmsg.DescribeClusterResponse](t, aliceCl, dc).ClusterAuthorizedOperations)
	bobCl, _ := clientAs(t, s, bob)
	require.Equal(t, int32(1<<acl.OpCreate|1<<acl.OpDescribe|1<<acl.OpDescribeConfigs),
		send[*kmsg.DescribeClusterResponse](t, bobCl, dc).ClusterAuthorizedOperations)
}

func TestAuthzGroups(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{})
	createTopic(t, s, "orders", 1)
	createTopic(t, s, "payments", 1)
	store.set(
		binding(acl.ResourceTopic, "orders", acl.PatternLiteral, alice, acl.OpAll, acl.PermissionAllow),
		binding(acl.ResourceTopic, "payments", acl.PatternLiteral, alice, acl.OpDescribe, acl.PermissionAllow),
		binding(acl.ResourceGroup, "app-", acl.PatternPrefixed, alice, acl.OpRead, acl.PermissionAllow),
		binding(acl.ResourceGroup, "app-private", acl.PatternLiteral, alice, acl.OpAll, acl.PermissionDeny),
		binding(acl.ResourceTopic, "orders", acl.PatternLiteral, bob, acl.OpRead, acl.PermissionAllow),
		binding(acl.ResourceGroup, "bob", acl.PatternLiteral, bob, acl.OpDescribe, acl.PermissionAllow),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, adminAdm := clientAs(t, s, admin)
	adminProd, _ := clientAs(t, s, admin)
	require.NoError(t, adminProd.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("o")}).FirstErr())

	// alice consumes in a group of hers and commits.
	cons, _ := clientAs(t, s, alice, kgo.ConsumerGroup("app-1"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for n := 0; n < 1; {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		n += fs.NumRecords()
	}
	require.NoError(t, cons.CommitUncommittedOffsets(ctx))
	offs, err := adminAdm.FetchOffsets(ctx, "app-1")
	require.NoError(t, err)
	o, ok := offs.Lookup("orders", 0)
	require.True(t, ok)
	require.EqualValues(t, 1, o.At)
	cons.Close()

	// A group she is denied, and bob's group APIs.
	aliceCl, _ := clientAs(t, s, alice)
	bobCl, _ := clientAs(t, s, bob)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{"app-1", "app-private", "other"}
	fcr := send[*kmsg.FindCoordinatorResponse](t, aliceCl, fc)
	codes := map[string]int16{}
	for _, c := range fcr.Coordinators {
		codes[c.Key] = c.ErrorCode
	}
	require.Equal(t, map[string]int16{"app-1": 0, "app-private": kerr.GroupAuthorizationFailed.Code,
		"other": kerr.GroupAuthorizationFailed.Code}, codes)

	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = 9, "bob", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	require.Equal(t, kerr.GroupAuthorizationFailed.Code, send[*kmsg.JoinGroupResponse](t, bobCl, jg).ErrorCode, "DESCRIBE is not READ")

	// OffsetCommit: the group's READ, then READ per topic.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 9, "app-2", -1
	for _, topic := range []string{"orders", "payments"} {
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = topic
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Offset = 1
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
	}
	ocr := send[*kmsg.OffsetCommitResponse](t, aliceCl, oc)
	require.Zero(t, ocr.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, ocr.Topics[1].Partitions[0].ErrorCode, "DESCRIBE is not READ")
	oc.Group = "app-private"
	ocr = send[*kmsg.OffsetCommitResponse](t, aliceCl, oc)
	require.Equal(t, kerr.GroupAuthorizationFailed.Code, ocr.Topics[0].Partitions[0].ErrorCode)

	// OffsetFetch of all topics leaves out the ones she may not describe;
	// bob may describe his group but not fetch app-2's.
	store.set(append(slices.Clone(mustACLs(store)),
		binding(acl.ResourceGroup, "app-2", acl.PatternLiteral, bob, acl.OpDescribe, acl.PermissionAllow))...)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 9
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = "app-2"
	of.Groups = append(of.Groups, og)
	ofr := send[*kmsg.OffsetFetchResponse](t, bobCl, of)
	require.Zero(t, ofr.Groups[0].ErrorCode)
	require.Len(t, ofr.Groups[0].Topics, 1, "bob may describe orders only")
	require.Equal(t, "orders", ofr.Groups[0].Topics[0].Topic)
	og.Group = "app-1"
	of.Groups = []kmsg.OffsetFetchRequestGroup{og}
	require.Equal(t, kerr.GroupAuthorizationFailed.Code, send[*kmsg.OffsetFetchResponse](t, bobCl, of).Groups[0].ErrorCode)

	// ListGroups shows bob only the groups he may describe; DescribeGroups
	// and DeleteGroups check each group.
	lg, err := kadm.NewClient(bobCl).ListGroups(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"app-2"}, lg.Groups(), "app-1 exists but bob may not describe it")
	lgAll, err := adminAdm.ListGroups(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"app-1", "app-2"}, lgAll.Groups())
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 5, []string{"app-1", "app-2"}, true
	dgr := send[*kmsg.DescribeGroupsResponse](t, bobCl, dg)
	byGroup := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range dgr.Groups {
		byGroup[g.Group] = g
	}
	require.Equal(t, kerr.GroupAuthorizationFailed.Code, byGroup["app-1"].ErrorCode)
	require.Zero(t, byGroup["app-2"].ErrorCode)
	require.Equal(t, int32(1<<acl.OpDescribe), byGroup["app-2"].AuthorizedOperations)
	del, err := kadm.NewClient(bobCl).DeleteGroups(ctx, "app-2")
	require.NoError(t, err)
	require.ErrorIs(t, del["app-2"].Err, kerr.GroupAuthorizationFailed)
}

// mustACLs is the store's current bindings.
func mustACLs(a *aclStore) []acl.Binding {
	bs, _ := a.ACLs()
	return bs
}

func TestAuthzTransactions(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{})
	createTopic(t, s, "orders", 1)
	store.set(
		binding(acl.ResourceTransactionalID, "tx-alice", acl.PatternPrefixed, alice, acl.OpWrite, acl.PermissionAllow),
		binding(acl.ResourceTopic, "orders", acl.PatternLiteral, alice, acl.OpWrite, acl.PermissionAllow),
		binding(acl.ResourceTopic, "orders", acl.PatternLiteral, bob, acl.OpAll, acl.PermissionAllow),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// alice's transactional producer works end to end.
	tx, _ := clientAs(t, s, alice, kgo.TransactionalID("tx-alice-1"), kgo.DefaultProduceTopic("orders"))
	require.NoError(t, tx.BeginTransaction())
	require.NoError(t, tx.ProduceSync(ctx, &kgo.Record{Value: []byte("in a transaction")}).FirstErr())
	require.NoError(t, tx.EndTransaction(ctx, kgo.TryCommit))

	// bob may write the topic but not use a transactional id.
	bobCl, _ := clientAs(t, s, bob)
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("tx-alice-1"), 10000
	require.Equal(t, kerr.TransactionalIDAuthorizationFailed.Code, send[*kmsg.InitProducerIDResponse](t, bobCl, ip).ErrorCode)
	pr := produceReq("orders", "forged")
	pr.TransactionID = kmsg.StringPtr("tx-alice-1")
	require.Equal(t, kerr.TransactionalIDAuthorizationFailed.Code,
		send[*kmsg.ProduceResponse](t, bobCl, pr).Topics[0].Partitions[0].ErrorCode)
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID = "tx-alice-1"
	require.Equal(t, kerr.TransactionalIDAuthorizationFailed.Code, send[*kmsg.EndTxnResponse](t, bobCl, et).ErrorCode)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"tx-alice-1"}
	require.Equal(t, kerr.TransactionalIDAuthorizationFailed.Code, send[*kmsg.FindCoordinatorResponse](t, bobCl, fc).Coordinators[0].ErrorCode)

	// Markers are for brokers: CLUSTER_ACTION.
	aliceCl, _ := clientAs(t, s, alice)
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.Topics = 1, []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "orders", Partitions: []int32{0}}}
	wm.Markers = append(wm.Markers, m)
	wmr := send[*kmsg.WriteTxnMarkersResponse](t, aliceCl, wm)
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, wmr.Markers[0].Topics[0].Partitions[0].ErrorCode)

	// Describe/ListTransactions show only describable transactional ids.
	_, aliceAdm := clientAs(t, s, alice)
	_, bobAdm := clientAs(t, s, bob)
	lt, err := aliceAdm.ListTransactions(ctx, nil, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"tx-alice-1"}, lt.TransactionalIDs())
	lt, err = bobAdm.ListTransactions(ctx, nil, nil)
	require.NoError(t, err)
	require.Empty(t, lt.TransactionalIDs())
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"tx-alice-1"}
	require.Equal(t, kerr.TransactionalIDAuthorizationFailed.Code,
		send[*kmsg.DescribeTransactionsResponse](t, bobCl, dt).TransactionStates[0].ErrorCode)
	require.Zero(t, send[*kmsg.DescribeTransactionsResponse](t, aliceCl, dt).TransactionStates[0].ErrorCode)
}

// TestAuthzSuperUserAndChanges: the super user passes a DENY of
// everything; a change of the ACLs applies to the next request.
func TestAuthzSuperUserAndChanges(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{})
	createTopic(t, s, "orders", 1)
	store.set(binding(acl.ResourceTopic, "*", acl.PatternLiteral, "User:*", acl.OpAll, acl.PermissionDeny))
	adminCl, _ := clientAs(t, s, admin)
	aliceCl, _ := clientAs(t, s, alice)
	require.Zero(t, send[*kmsg.ProduceResponse](t, adminCl, produceReq("orders", "a")).Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code,
		send[*kmsg.ProduceResponse](t, aliceCl, produceReq("orders", "a")).Topics[0].Partitions[0].ErrorCode)

	store.set(binding(acl.ResourceTopic, "orders", acl.PatternLiteral, alice, acl.OpWrite, acl.PermissionAllow))
	require.Zero(t, send[*kmsg.ProduceResponse](t, aliceCl, produceReq("orders", "a")).Topics[0].Partitions[0].ErrorCode,
		"on the same connection, the new ACLs")
	store.set()
	require.Equal(t, kerr.TopicAuthorizationFailed.Code,
		send[*kmsg.ProduceResponse](t, aliceCl, produceReq("orders", "a")).Topics[0].Partitions[0].ErrorCode,
		"no ACL: denied")
}

// TestAuthzAllowEveryoneIfNoACL: with the setting, a resource no binding
// names is open; one an ACL names is not.
func TestAuthzAllowEveryoneIfNoACL(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{Authz: node.AuthzConfig{AllowEveryoneIfNoACL: true}})
	createTopic(t, s, "open", 1)
	createTopic(t, s, "guarded", 1)
	store.set(binding(acl.ResourceTopic, "guarded", acl.PatternLiteral, alice, acl.OpWrite, acl.PermissionAllow))
	bobCl, _ := clientAs(t, s, bob)
	require.Zero(t, send[*kmsg.ProduceResponse](t, bobCl, produceReq("open", "b")).Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code,
		send[*kmsg.ProduceResponse](t, bobCl, produceReq("guarded", "b")).Topics[0].Partitions[0].ErrorCode)
}

// TestAuthzSecurityAdminAPIs: the ACL and SCRAM admin APIs need their
// cluster operation: DESCRIBE to describe, ALTER to change.
func TestAuthzSecurityAdminAPIs(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{})
	store.set(binding(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, bob, acl.OpDescribe, acl.PermissionAllow))
	ctx := context.Background()
	_, aliceAdm := clientAs(t, s, alice)
	_, bobAdm := clientAs(t, s, bob)
	_, adminAdm := clientAs(t, s, admin)
	grant := kadm.NewACLs().Topics("x").Allow("User:z").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)

	for _, adm := range []*kadm.Client{aliceAdm, bobAdm} {
		cr, err := adm.CreateACLs(ctx, grant)
		require.NoError(t, err)
		require.ErrorIs(t, cr[0].Err, kerr.ClusterAuthorizationFailed, "ALTER on the cluster is needed")
	}
	cr, err := adminAdm.CreateACLs(ctx, grant)
	require.NoError(t, err)
	require.NoError(t, cr[0].Err)

	aliceCl, _ := clientAs(t, s, alice)
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dar := send[*kmsg.DescribeACLsResponse](t, aliceCl, da)
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, dar.ErrorCode)
	require.Empty(t, dar.Resources)
	bobCl, _ := clientAs(t, s, bob)
	dar = send[*kmsg.DescribeACLsResponse](t, bobCl, da)
	require.Zero(t, dar.ErrorCode)
	require.Len(t, dar.Resources, 1, "the binding the super user created")

	_, err = aliceAdm.DescribeUserSCRAMs(ctx)
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed)
	_, err = bobAdm.DescribeUserSCRAMs(ctx)
	require.NoError(t, err)
	ar, err := bobAdm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"}})
	if err == nil { // kadm returns a user's error itself, or in the result
		err = ar["carol"].Err
	}
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed)

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	delr := send[*kmsg.DeleteACLsResponse](t, bobCl, del)
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, delr.Results[0].ErrorCode)
	require.Zero(t, send[*kmsg.DescribeACLsResponse](t, bobCl, da).ErrorCode)
	require.Len(t, send[*kmsg.DescribeACLsResponse](t, bobCl, da).Resources, 1, "nothing deleted")

	// Quotas: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster.
	dq := kmsg.NewPtrDescribeClientQuotasRequest()
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, send[*kmsg.DescribeClientQuotasResponse](t, bobCl, dq).ErrorCode, "DESCRIBE is not DESCRIBE_CONFIGS")
	adminCl, _ := clientAs(t, s, admin)
	require.Zero(t, send[*kmsg.DescribeClientQuotasResponse](t, adminCl, dq).ErrorCode)
	aq := kmsg.NewPtrAlterClientQuotasRequest()
	aq.Entries = []kmsg.AlterClientQuotasRequestEntry{{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("carol")}},
		Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}},
	}}
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, send[*kmsg.AlterClientQuotasResponse](t, bobCl, aq).Entries[0].ErrorCode)
	require.Zero(t, send[*kmsg.AlterClientQuotasResponse](t, adminCl, aq).Entries[0].ErrorCode)
}

// TestAuthzConsumerGroupTopics: a KIP-848 member must be able to describe
// every topic it subscribes to by name, and a group whose members use a
// topic the requester may not describe is not described to it — neither
// API tells a principal which hidden topics exist.
func TestAuthzConsumerGroupTopics(t *testing.T) {
	s, store := startAuthzServer(t, node.Config{})
	createTopic(t, s, "orders", 1)
	createTopic(t, s, "secret", 1)
	store.set(
		binding(acl.ResourceTopic, "orders", acl.PatternLiteral, alice, acl.OpAll, acl.PermissionAllow),
		binding(acl.ResourceGroup, "app-", acl.PatternPrefixed, alice, acl.OpAll, acl.PermissionAllow),
	)
	aliceCl, _ := clientAs(t, s, alice)
	adminCl, _ := clientAs(t, s, admin)
	hb := func(cl *kgo.Client, group string, topics ...string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberEpoch, req.RebalanceTimeoutMillis = group, 0, 30000
		req.MemberID = "member-of-" + group // v1: the client names its member
		req.SubscribedTopicNames = topics
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return send[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, req)
	}
	denied := hb(aliceCl, "app-1", "orders", "secret")
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, denied.ErrorCode)
	require.Contains(t, *denied.ErrorMessage, "secret")
	// The coordinator loads __consumer_offsets on first use (created by
	// FindCoordinator, as a client asks first): poll until it answers.
	joined := func(cl *kgo.Client, group string, topics ...string) {
		t.Helper()
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKeys = 4, []string{group}
		send[*kmsg.FindCoordinatorResponse](t, cl, fc)
		require.Eventually(t, func() bool {
			r := hb(cl, group, topics...)
			require.NotEqual(t, kerr.TopicAuthorizationFailed.Code, r.ErrorCode)
			return r.ErrorCode == 0
		}, 20*time.Second, 20*time.Millisecond)
	}
	joined(aliceCl, "app-1", "orders")

	// The admin's member of app-2 subscribes to the secret topic: alice may
	// read the group, but not learn what it consumes.
	joined(adminCl, "app-2", "secret")
	desc := kmsg.NewPtrConsumerGroupDescribeRequest()
	desc.Groups = []string{"app-1", "app-2"}
	dr := send[*kmsg.ConsumerGroupDescribeResponse](t, aliceCl, desc)
	codes := map[string]int16{}
	for _, g := range dr.Groups {
		codes[g.Group] = g.ErrorCode
		if g.Group == "app-2" {
			require.Empty(t, g.Members, "nothing of the group is described")
		}
	}
	require.Equal(t, map[string]int16{"app-1": 0, "app-2": kerr.TopicAuthorizationFailed.Code}, codes)
	dr = send[*kmsg.ConsumerGroupDescribeResponse](t, adminCl, desc)
	for _, g := range dr.Groups {
		require.Zero(t, g.ErrorCode, "the super user sees %s", g.Group)
	}
}
