package kafka_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/node"
)

// kadm creates, describes and deletes ACLs with its builders, against a
// whole node: literal, prefixed, cluster and group bindings, Kafka's
// errors per creation, and filters that match what Kafka's match.
func TestACLAdminWithKadm(t *testing.T) {
	s := startServer(t, node.Config{})
	cl, adm := adminClient(t, s)
	ctx := context.Background()

	b := kadm.NewACLs().Allow("User:alice").Topics("orders", "payments").
		Operations(kadm.OpRead, kadm.OpDescribe)
	created, err := adm.CreateACLs(ctx, b)
	require.NoError(t, err)
	require.Len(t, created, 4)
	for _, c := range created {
		require.NoError(t, c.Err, "%+v", c)
	}
	pre := kadm.NewACLs().Deny("User:bob").AllowHosts().DenyHosts("10.0.0.9").Topics("orders-").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite)
	created, err = adm.CreateACLs(ctx, pre)
	require.NoError(t, err)
	require.Len(t, created, 1)
	require.NoError(t, created[0].Err)
	clusterACL := kadm.NewACLs().Allow("User:admin").Clusters().Operations(kadm.OpAlter)
	created, err = adm.CreateACLs(ctx, clusterACL)
	require.NoError(t, err)
	require.NoError(t, created[0].Err)

	// Kafka's validation, per creation (raw: kadm's builder refuses some
	// of these itself).
	req := kmsg.NewPtrCreateACLsRequest()
	add := func(mod func(*kmsg.CreateACLsRequestCreation)) {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.Principal, c.Host = kmsg.ACLResourceTypeTopic, "t", "User:x", "*"
		c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		mod(&c)
		req.Creations = append(req.Creations, c)
	}
	add(func(*kmsg.CreateACLsRequestCreation) {})                        // fine
	add(func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "x" })   // not Type:Name
	add(func(c *kmsg.CreateACLsRequestCreation) { c.Host = "" })         // empty host
	add(func(c *kmsg.CreateACLsRequestCreation) { c.ResourceName = "" }) // empty name
	add(func(c *kmsg.CreateACLsRequestCreation) { c.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch })
	add(func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationAny })
	add(func(c *kmsg.CreateACLsRequestCreation) { c.PermissionType = kmsg.ACLPermissionTypeAny })
	add(func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeAny })
	add(func(c *kmsg.CreateACLsRequestCreation) {
		c.ResourceType, c.ResourceName = kmsg.ACLResourceTypeCluster, "other"
	})
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Results, len(req.Creations))
	require.Zero(t, resp.Results[0].ErrorCode)
	for i, r := range resp.Results[1:] {
		require.Equal(t, kerr.InvalidRequest.Code, r.ErrorCode, "creation %d", i+1)
		require.NotNil(t, r.ErrorMessage)
	}

	// Describe everything: 4 + 1 + 1 + the raw one.
	all := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow().Deny().AllowHosts().DenyHosts().
		Operations(kadm.OpAny)
	described, err := adm.DescribeACLs(ctx, all)
	require.NoError(t, err)
	require.Len(t, described, 1)
	require.NoError(t, described[0].Err)
	require.Len(t, described[0].Described, 7)

	// MATCH: what applies to topic "orders-eu": the prefixed deny.
	match := kadm.NewACLs().Topics("orders-eu").ResourcePatternType(kadm.ACLPatternMatch).Allow().Deny().
		AllowHosts().DenyHosts().Operations(kadm.OpAny)
	described, err = adm.DescribeACLs(ctx, match)
	require.NoError(t, err)
	require.Len(t, described[0].Described, 1)
	d := described[0].Described[0]
	require.Equal(t, "User:bob", d.Principal)
	require.Equal(t, "10.0.0.9", d.Host)
	require.Equal(t, kadm.ACLPatternPrefixed, d.Pattern)
	require.Equal(t, kmsg.ACLPermissionTypeDeny, d.Permission)

	// Delete alice's READ on both topics; describe shows the rest.
	del := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders", "payments").Operations(kadm.OpRead)
	deleted, err := adm.DeleteACLs(ctx, del)
	require.NoError(t, err)
	var n int
	for _, r := range deleted {
		require.NoError(t, r.Err)
		n += len(r.Deleted)
		for _, d := range r.Deleted {
			require.Equal(t, kadm.OpRead, d.Operation)
		}
	}
	require.Equal(t, 2, n)
	described, err = adm.DescribeACLs(ctx, all)
	require.NoError(t, err)
	require.Len(t, described[0].Described, 5)

	// An UNKNOWN value in a describe filter: INVALID_REQUEST.
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeUnknown, kmsg.ACLResourcePatternTypeAny
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dresp, err := dreq.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRequest.Code, dresp.ErrorCode)

	// Every version of the three APIs is served.
	for v := int16(0); v <= 3; v++ {
		dreq := kmsg.NewPtrDescribeACLsRequest()
		dreq.Version = v
		dreq.ResourceType, dreq.Operation, dreq.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		if v > 0 {
			dreq.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		}
		kresp, err := cl.Request(ctx, dreq) // pinned: no version negotiation
		require.NoError(t, err, "v%d", v)
		dr := kresp.(*kmsg.DescribeACLsResponse)
		require.Zero(t, dr.ErrorCode, "v%d", v)
		require.NotEmpty(t, dr.Resources, "v%d", v)
	}
}

// kadm creates, describes and deletes SCRAM users: the salted password is
// turned into stored keys, mechanisms and iterations are described back,
// and Kafka's errors come per user.
func TestScramAdminWithKadm(t *testing.T) {
	s := startServer(t, node.Config{})
	cl, adm := adminClient(t, s)
	ctx := context.Background()

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-secret"},
	})
	require.NoError(t, err)
	errs := map[string]error{}
	for _, a := range altered {
		errs[a.User] = a.Err
	}
	require.NoError(t, errs["alice"])
	require.NoError(t, errs["bob"])

	described, err := adm.DescribeUserSCRAMs(ctx)
	require.NoError(t, err)
	require.Len(t, described, 2)
	require.Equal(t, []kadm.CredInfo{{Mechanism: kadm.ScramSha256, Iterations: 4096}}, described["alice"].CredInfos)
	require.Equal(t, []kadm.CredInfo{{Mechanism: kadm.ScramSha512, Iterations: 8192}}, described["bob"].CredInfos)

	// What is stored is what a SCRAM login with the password checks
	// against (RFC 5802 keys of kadm's salted password), never the
	// password itself.
	stored, ok := s.k.SecurityMeta().ScramCredential("bob", metadata.ScramSHA512)
	require.True(t, ok)
	want, err := metadata.ScramCredentialFromPassword("bob", metadata.ScramSHA512, "bob-secret", stored.Salt, 8192)
	require.NoError(t, err)
	require.Equal(t, want, stored)
	require.NotContains(t, fmt.Sprintf("%v %+v %#v", stored, stored, stored), "bob-secret")

	described, err = adm.DescribeUserSCRAMs(ctx, "alice", "nobody")
	require.NoError(t, err)
	require.NoError(t, described["alice"].Err)
	require.ErrorIs(t, described["nobody"].Err, kerr.ResourceNotFound)

	// Delete one, and a credential that does not exist.
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256},
		{User: "bob", Mechanism: kadm.ScramSha256},
	}, nil)
	require.NoError(t, err)
	errs = map[string]error{}
	for _, a := range altered {
		errs[a.User] = a.Err
	}
	require.NoError(t, errs["alice"])
	require.ErrorIs(t, errs["bob"], kerr.ResourceNotFound)
	described, err = adm.DescribeUserSCRAMs(ctx)
	require.NoError(t, err)
	require.Len(t, described, 1)
	require.Contains(t, described, "bob")

	// Raw: a user twice is DUPLICATE_RESOURCE for both; an unknown
	// mechanism UNSUPPORTED_SASL_MECHANISM.
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "dave", 1, 4096, []byte("salt"), make([]byte, 32)
	req.Upsertions = append(req.Upsertions, up)
	up.Mechanism = 2
	req.Upsertions = append(req.Upsertions, up)
	up.Name, up.Mechanism = "erin", 3
	req.Upsertions = append(req.Upsertions, up)
	up.Name, up.Mechanism, up.Iterations = "frank", 1, 100
	req.Upsertions = append(req.Upsertions, up)
	up.Name, up.Iterations = "gina", 16385
	req.Upsertions = append(req.Upsertions, up)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	var codes []int16
	for _, r := range resp.Results {
		codes = append(codes, r.ErrorCode)
	}
	require.Equal(t, []int16{kerr.DuplicateResource.Code, kerr.UnsupportedSaslMechanism.Code,
		kerr.UnacceptableCredential.Code, kerr.UnacceptableCredential.Code}, codes, "one result per user")
	require.Equal(t, "dave", resp.Results[0].User)
}

func quotaName(s string) *string { return &s }

// kadm sets, describes and removes client quotas, with Kafka's per-entity
// validation and describe filters.
func TestClientQuotaAdminWithKadm(t *testing.T) {
	s := startServer(t, node.Config{})
	_, adm := adminClient(t, s)
	ctx := context.Background()
	user := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "user", Name: n}
	}
	client := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "client-id", Name: n}
	}
	ip := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "ip", Name: n}
	}
	set := func(k string, v float64) kadm.AlterClientQuotaOp { return kadm.AlterClientQuotaOp{Key: k, Value: v} }

	entries := []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{user(quotaName("alice"))}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1<<20), set("consumer_byte_rate", 2<<20)}},
		{Entity: kadm.ClientQuotaEntity{user(nil)}, Ops: []kadm.AlterClientQuotaOp{set("request_percentage", 50)}},
		{Entity: kadm.ClientQuotaEntity{user(quotaName("alice")), client(quotaName("app"))}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1024)}},
		{Entity: kadm.ClientQuotaEntity{ip(quotaName("127.0.0.2"))}, Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 10)}},
		{Entity: kadm.ClientQuotaEntity{ip(quotaName("127.0.0.3"))}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 10)}},
		{Entity: kadm.ClientQuotaEntity{client(quotaName("x"))}, Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", -1)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "group", Name: quotaName("g")}}, Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 1)}},
	}
	validated, err := adm.ValidateAlterClientQuotas(ctx, entries)
	require.NoError(t, err)
	for i, v := range validated {
		switch {
		case i < 4:
			require.NoError(t, v.Err, "%d %v", i, v.Entity)
		default:
			require.ErrorIs(t, v.Err, kerr.InvalidRequest, "%d", i)
		}
	}
	none, err := adm.DescribeClientQuotas(ctx, false, nil)
	require.NoError(t, err)
	require.Empty(t, none, "validate only changes nothing")

	_, err = adm.AlterClientQuotas(ctx, entries[:4])
	require.NoError(t, err)
	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	require.NoError(t, err)
	require.Len(t, all, 4)

	// Alice's: exact user=alice matches both of hers unless strict.
	filter := []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: quotaName("alice"), MatchType: kmsg.QuotasMatchTypeExact}}
	got, err := adm.DescribeClientQuotas(ctx, false, filter)
	require.NoError(t, err)
	require.Len(t, got, 2)
	got, err = adm.DescribeClientQuotas(ctx, true, filter)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, kadm.ClientQuotaValues{{Key: "consumer_byte_rate", Value: 2 << 20}, {Key: "producer_byte_rate", Value: 1 << 20}}, sortedValues(got[0].Values))
	got, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeDefault}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Nil(t, got[0].Entity[0].Name)
	got, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}})
	require.NoError(t, err)
	require.Len(t, got, 1)

	// A bad filter fails the request: ip with user.
	_, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{
		{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}, {Type: "user", MatchType: kmsg.QuotasMatchTypeAny}})
	require.ErrorIs(t, err, kerr.InvalidRequest)

	// Removing every value removes the entity.
	_, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{ip(quotaName("127.0.0.2"))},
		Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Remove: true}}}})
	require.NoError(t, err)
	all, err = adm.DescribeClientQuotas(ctx, false, nil)
	require.NoError(t, err)
	require.Len(t, all, 3)
}

func sortedValues(v kadm.ClientQuotaValues) kadm.ClientQuotaValues {
	sort.Slice(v, func(i, j int) bool { return v[i].Key < v[j].Key })
	return v
}
