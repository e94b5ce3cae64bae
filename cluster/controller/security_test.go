package controller

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
)

func strp(s string) *string { return &s }

func topicACL(principal, name string, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: name, PatternType: acl.PatternLiteral,
		Principal: principal, Host: "*", Operation: op, Permission: perm}
}

func scramCred(t testing.TB, user, mech, password string, iterations int32) metadata.ScramCredential {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	c, err := metadata.ScramCredentialFromPassword(user, mech, password, salt, iterations)
	require.NoError(t, err)
	return c
}

func TestACLsCreateListDelete(t *testing.T) {
	c, dir := openTest(t)
	ctx := testCtx(t)
	bs, v0 := c.ACLs()
	require.Empty(t, bs)

	alice := topicACL("User:alice", "orders", acl.OpRead, acl.PermissionAllow)
	bob := topicACL("User:bob", "orders", acl.OpWrite, acl.PermissionDeny)
	prefixed := acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "app-", PatternType: acl.PatternPrefixed,
		Principal: "User:alice", Host: "10.0.0.1", Operation: acl.OpAll, Permission: acl.PermissionAllow}
	cluster := acl.Binding{ResourceType: acl.ResourceCluster, ResourceName: "kafka-cluster", PatternType: acl.PatternLiteral,
		Principal: "User:admin", Host: "*", Operation: acl.OpAlter, Permission: acl.PermissionAllow}
	bad := alice
	bad.Principal = "alice" // not Type:Name
	errs := c.CreateACLs(ctx, []acl.Binding{alice, bob, bad, prefixed, cluster, alice})
	require.Len(t, errs, 6)
	for i, err := range errs {
		if i == 2 {
			require.ErrorIs(t, err, metadata.ErrInvalidRequest)
			continue
		}
		require.NoError(t, err, i)
	}
	bs, v1 := c.ACLs()
	require.Greater(t, v1, v0)
	require.Len(t, bs, 4, "the duplicate is stored once")
	require.Equal(t, []acl.Binding{alice, bob, prefixed, cluster}, bs, "sorted by resource type, pattern, name, principal")

	// Creating what exists changes nothing, not even the version.
	require.Equal(t, []error{nil}, c.CreateACLs(ctx, []acl.Binding{bob}))
	_, v := c.ACLs()
	require.Equal(t, v1, v)

	// The published slice is immutable: a later change publishes another.
	held := bs
	deleted, errs := c.DeleteACLs(ctx, []acl.Filter{
		{ResourceType: acl.ResourceTopic, ResourceName: strp("orders"), PatternType: acl.PatternMatch,
			Operation: acl.OpAny, Permission: acl.PermissionDeny},
		{ResourceType: acl.ResourceUnknown, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: strp("User:nobody"), Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionDeny},
	})
	require.Equal(t, [][]acl.Binding{{bob}, nil, {}, {bob}}, deleted, "a binding two filters select is listed for both")
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], metadata.ErrInvalidRequest)
	require.NoError(t, errs[2])
	require.NoError(t, errs[3])
	require.Equal(t, []acl.Binding{alice, bob, prefixed, cluster}, held)
	bs, v2 := c.ACLs()
	require.Greater(t, v2, v1)
	require.Equal(t, []acl.Binding{alice, prefixed, cluster}, bs)

	// Persisted: a restart loads them.
	require.NoError(t, c.Close())
	c = openAt(t, Options{Dir: dir, NodeID: 1})
	got, v3 := c.ACLs()
	require.Equal(t, bs, got)
	require.NotZero(t, v3)
}

func TestValidateACLBinding(t *testing.T) {
	ok := topicACL("User:alice", "t", acl.OpRead, acl.PermissionAllow)
	require.NoError(t, metadata.ValidateACLBinding(ok))
	for name, mod := range map[string]func(*acl.Binding){
		"resource any":          func(b *acl.Binding) { b.ResourceType = acl.ResourceAny },
		"resource unknown":      func(b *acl.Binding) { b.ResourceType = acl.ResourceUnknown },
		"resource out of range": func(b *acl.Binding) { b.ResourceType = 42 },
		"pattern match":         func(b *acl.Binding) { b.PatternType = acl.PatternMatch },
		"pattern any":           func(b *acl.Binding) { b.PatternType = acl.PatternAny },
		"operation any":         func(b *acl.Binding) { b.Operation = acl.OpAny },
		"operation unknown":     func(b *acl.Binding) { b.Operation = acl.OpUnknown },
		"permission any":        func(b *acl.Binding) { b.Permission = acl.PermissionAny },
		"empty name":            func(b *acl.Binding) { b.ResourceName = "" },
		"empty host":            func(b *acl.Binding) { b.Host = "" },
		"principal no colon":    func(b *acl.Binding) { b.Principal = "alice" },
		"principal no name":     func(b *acl.Binding) { b.Principal = "User:" },
		"cluster other name": func(b *acl.Binding) {
			b.ResourceType, b.ResourceName = acl.ResourceCluster, "my-cluster"
		},
	} {
		b := ok
		mod(&b)
		require.ErrorIs(t, metadata.ValidateACLBinding(b), metadata.ErrInvalidRequest, name)
	}
}

func TestACLFilterMatches(t *testing.T) {
	lit := topicACL("User:a", "foo", acl.OpRead, acl.PermissionAllow)
	wild := topicACL("User:a", "*", acl.OpRead, acl.PermissionAllow)
	pre := lit
	pre.PatternType, pre.ResourceName = acl.PatternPrefixed, "fo"
	all := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	for _, b := range []acl.Binding{lit, wild, pre} {
		require.True(t, metadata.ACLFilterMatches(all, b))
	}
	match := all
	match.ResourceName, match.PatternType = strp("foobar"), acl.PatternMatch
	require.False(t, metadata.ACLFilterMatches(match, lit))
	require.True(t, metadata.ACLFilterMatches(match, wild))
	require.True(t, metadata.ACLFilterMatches(match, pre))
	match.ResourceName = strp("foo")
	require.True(t, metadata.ACLFilterMatches(match, lit))
	exact := all
	exact.ResourceName = strp("foo")
	require.True(t, metadata.ACLFilterMatches(exact, lit))
	require.False(t, metadata.ACLFilterMatches(exact, wild), "ANY pattern with a name is exact")
	lits := all
	lits.PatternType = acl.PatternLiteral
	require.False(t, metadata.ACLFilterMatches(lits, pre))
	other := all
	other.Host = strp("1.2.3.4")
	require.False(t, metadata.ACLFilterMatches(other, lit))
	other = all
	other.Operation = acl.OpWrite
	require.False(t, metadata.ACLFilterMatches(other, lit))
	other = all
	other.ResourceType = acl.ResourceGroup
	require.False(t, metadata.ACLFilterMatches(other, lit))
}

func TestScramCredentials(t *testing.T) {
	c, dir := openTest(t)
	ctx := testCtx(t)
	alice := scramCred(t, "alice", metadata.ScramSHA256, "pw", 4096)
	bob := scramCred(t, "bob", metadata.ScramSHA512, "pw", 8192)
	dup1 := scramCred(t, "carol", metadata.ScramSHA256, "pw", 4096)
	dup2 := scramCred(t, "carol", metadata.ScramSHA512, "pw", 4096)
	few := alice
	few.User, few.Iterations = "dave", 4095
	many := alice
	many.User, many.Iterations = "erin", 16385
	mech := alice
	mech.User, mech.Mechanism = "frank", "SCRAM-SHA-1"
	errs := c.AlterScramCredentials(ctx, []metadata.ScramCredential{alice, bob, dup1, dup2, few, many, mech},
		[]metadata.ScramDeletion{{User: "nobody", Mechanism: metadata.ScramSHA256}, {User: "gina", Mechanism: "SCRAM-SHA-1024"}})
	require.Len(t, errs, 9)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], metadata.ErrDuplicateResource)
	require.ErrorIs(t, errs[3], metadata.ErrDuplicateResource)
	require.ErrorIs(t, errs[4], metadata.ErrUnacceptableCredential)
	require.ErrorIs(t, errs[5], metadata.ErrUnacceptableCredential)
	require.ErrorIs(t, errs[6], metadata.ErrUnsupportedSaslMechanism)
	require.ErrorIs(t, errs[7], metadata.ErrResourceNotFound)
	require.ErrorIs(t, errs[8], metadata.ErrUnsupportedSaslMechanism)
	// A user both upserted and deleted in one request: both refused.
	errs = c.AlterScramCredentials(ctx, []metadata.ScramCredential{scramCred(t, "alice", metadata.ScramSHA512, "pw", 4096)},
		[]metadata.ScramDeletion{{User: "alice", Mechanism: metadata.ScramSHA256}})
	require.ErrorIs(t, errs[0], metadata.ErrDuplicateResource)
	require.ErrorIs(t, errs[1], metadata.ErrDuplicateResource)

	got, ok := c.ScramCredential("alice", metadata.ScramSHA256)
	require.True(t, ok)
	require.Equal(t, alice.StoredKey, got.StoredKey)
	require.NotContains(t, got.String(), string(got.ServerKey))
	_, ok = c.ScramCredential("alice", metadata.ScramSHA512)
	require.False(t, ok)
	all := c.ScramCredentials()
	require.Len(t, all, 2)
	require.Equal(t, "alice", all[0].User)
	require.Equal(t, "bob", all[1].User)

	// Replace, then delete.
	alice2 := scramCred(t, "alice", metadata.ScramSHA256, "new", 5000)
	require.Equal(t, []error{nil}, c.AlterScramCredentials(ctx, []metadata.ScramCredential{alice2}, nil))
	got, _ = c.ScramCredential("alice", metadata.ScramSHA256)
	require.EqualValues(t, 5000, got.Iterations)
	require.Equal(t, []error{nil}, c.AlterScramCredentials(ctx, nil, []metadata.ScramDeletion{{User: "bob", Mechanism: metadata.ScramSHA512}}))
	_, ok = c.ScramCredential("bob", metadata.ScramSHA512)
	require.False(t, ok)

	require.NoError(t, c.Close())
	c = openAt(t, Options{Dir: dir, NodeID: 1})
	require.Equal(t, []metadata.ScramCredential{alice2}, c.ScramCredentials())
}

func quotaEntity(parts ...string) []metadata.QuotaEntityPart {
	var out []metadata.QuotaEntityPart
	for i := 0; i < len(parts); i += 2 {
		p := metadata.QuotaEntityPart{Type: parts[i]}
		if parts[i+1] != "<default>" {
			p.Name = strp(parts[i+1])
		}
		out = append(out, p)
	}
	return out
}

func TestClientQuotas(t *testing.T) {
	c, dir := openTest(t)
	ctx := testCtx(t)
	set := func(k string, v float64) metadata.ClientQuotaOp { return metadata.ClientQuotaOp{Key: k, Value: v} }
	alts := []metadata.ClientQuotaAlteration{
		{Entity: quotaEntity("user", "alice"), Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 1024), set("request_percentage", 12.5)}},
		{Entity: quotaEntity("client-id", "app", "user", "<default>"), Ops: []metadata.ClientQuotaOp{set("consumer_byte_rate", 2048)}},
		{Entity: quotaEntity("ip", "10.0.0.1"), Ops: []metadata.ClientQuotaOp{set("connection_creation_rate", 5)}},
		{Entity: quotaEntity("ip", "10.0.0.2"), Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 5)}},  // key not for ip
		{Entity: quotaEntity("user", "x"), Ops: []metadata.ClientQuotaOp{set("connection_creation_rate", 5)}}, // ip only
		{Entity: quotaEntity("user", "x"), Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 0)}},       // not > 0
		{Entity: quotaEntity("user", "x"), Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 1.5)}},     // fraction
		{Entity: quotaEntity("user", "x"), Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 1), set("producer_byte_rate", 2)}},
		{Entity: quotaEntity("user", "x", "ip", "1.2.3.4"), Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: quotaEntity("ip", "not-an-ip"), Ops: []metadata.ClientQuotaOp{set("connection_creation_rate", 1)}},
		{Entity: quotaEntity("user", ""), Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: nil, Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: quotaEntity("group", "g"), Ops: []metadata.ClientQuotaOp{set("producer_byte_rate", 1)}},
	}
	// validateOnly answers the same and changes nothing.
	for _, validateOnly := range []bool{true, false} {
		errs := c.AlterClientQuotas(ctx, alts, validateOnly)
		require.Len(t, errs, len(alts))
		for i := range 3 {
			require.NoError(t, errs[i], i)
		}
		for i := 3; i < 13; i++ {
			require.ErrorIs(t, errs[i], metadata.ErrInvalidRequest, i)
		}
		require.ErrorIs(t, errs[12], metadata.ErrUnsupportedQuotaEntity)
		qs, _ := c.ClientQuotas()
		if validateOnly {
			require.Empty(t, qs)
		}
	}
	qs, v1 := c.ClientQuotas()
	require.NotZero(t, v1)
	require.Len(t, qs, 3)
	require.Equal(t, map[string]float64{"consumer_byte_rate": 2048}, qs[0].Values)
	require.Equal(t, quotaEntity("client-id", "app", "user", "<default>"), qs[0].Entity)
	require.Equal(t, quotaEntity("ip", "10.0.0.1"), qs[1].Entity)
	require.Equal(t, map[string]float64{"producer_byte_rate": 1024, "request_percentage": 12.5}, qs[2].Values)

	// Removing a value; removing the last one removes the entity.
	errs := c.AlterClientQuotas(ctx, []metadata.ClientQuotaAlteration{
		{Entity: quotaEntity("user", "alice"), Ops: []metadata.ClientQuotaOp{{Key: "request_percentage", Remove: true}}},
		{Entity: quotaEntity("ip", "10.0.0.1"), Ops: []metadata.ClientQuotaOp{{Key: "connection_creation_rate", Remove: true}}},
	}, false)
	require.Equal(t, []error{nil, nil}, errs)
	qs, v2 := c.ClientQuotas()
	require.Greater(t, v2, v1)
	require.Len(t, qs, 2)
	require.Equal(t, map[string]float64{"producer_byte_rate": 1024}, qs[1].Values)

	// Removing what is not set (even a key the entity cannot have) and
	// setting a value as it is change nothing; an entity twice in one
	// request: the second is refused.
	errs = c.AlterClientQuotas(ctx, []metadata.ClientQuotaAlteration{
		{Entity: quotaEntity("user", "alice"), Ops: []metadata.ClientQuotaOp{{Key: "connection_creation_rate", Remove: true}, {Key: "producer_byte_rate", Value: 1024}}},
		{Entity: quotaEntity("user", "nobody"), Ops: []metadata.ClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
	}, false)
	require.Equal(t, []error{nil, nil}, errs)
	_, v3 := c.ClientQuotas()
	require.Equal(t, v2, v3)
	errs = c.AlterClientQuotas(ctx, []metadata.ClientQuotaAlteration{
		{Entity: quotaEntity("user", "carol"), Ops: []metadata.ClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: quotaEntity("user", "carol"), Ops: []metadata.ClientQuotaOp{{Key: "producer_byte_rate", Value: 2}}},
	}, false)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], metadata.ErrInvalidRequest)
	qs, _ = c.ClientQuotas()
	require.Len(t, qs, 3)
	require.Equal(t, map[string]float64{"producer_byte_rate": 1}, qs[2].Values, "the first applies")

	require.NoError(t, c.Close())
	c = openAt(t, Options{Dir: dir, NodeID: 1})
	got, _ := c.ClientQuotas()
	require.Equal(t, qs, got)
}

// TestSecuritySnapshotRestore: a follower restoring a snapshot gets the
// security metadata, and a new version of it.
func TestSecuritySnapshotRestore(t *testing.T) {
	src, _ := openTest(t)
	ctx := testCtx(t)
	b := topicACL("User:alice", "t", acl.OpRead, acl.PermissionAllow)
	require.Equal(t, []error{nil}, src.CreateACLs(ctx, []acl.Binding{b}))
	cred := scramCred(t, "alice", metadata.ScramSHA512, "pw", 4096)
	require.Equal(t, []error{nil}, src.AlterScramCredentials(ctx, []metadata.ScramCredential{cred}, nil))
	require.Equal(t, []error{nil}, src.AlterClientQuotas(ctx, []metadata.ClientQuotaAlteration{
		{Entity: quotaEntity("user", "<default>"), Ops: []metadata.ClientQuotaOp{{Key: "consumer_byte_rate", Value: 100}}}}, false))
	require.NoError(t, src.raft.Snapshot().Error())
	snaps, err := src.db.SnapshotStore().List()
	require.NoError(t, err)
	_, rc, err := src.db.SnapshotStore().Open(snaps[0].ID)
	require.NoError(t, err)

	dst, _ := openTest(t)
	stale := topicACL("User:stale", "t", acl.OpRead, acl.PermissionAllow)
	require.Equal(t, []error{nil}, dst.CreateACLs(ctx, []acl.Binding{stale}))
	_, before := dst.ACLs()
	require.NoError(t, (&fsm{c: dst}).Restore(rc))
	got, after := dst.ACLs()
	require.Equal(t, []acl.Binding{b}, got)
	require.NotEqual(t, before, after)
	require.Equal(t, src.ScramCredentials(), dst.ScramCredentials())
	sq, _ := src.ClientQuotas()
	dq, _ := dst.ClientQuotas()
	require.Equal(t, sq, dq)
}

// TestSecurityMultiNode: changes made through any node (a follower
// forwards to the active controller) are visible on every node.
func TestSecurityMultiNode(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.awaitReady()
	ctx := testCtx(t)
	f := tc.follower()
	b := topicACL("User:alice", "orders", acl.OpWrite, acl.PermissionAllow)
	require.Equal(t, []error{nil}, f.CreateACLs(ctx, []acl.Binding{b}))
	got, _ := f.ACLs()
	require.Equal(t, []acl.Binding{b}, got, "the forwarding node reads its own write")
	cred := scramCred(t, "alice", metadata.ScramSHA256, "pw", 4096)
	require.Equal(t, []error{nil}, f.AlterScramCredentials(ctx, []metadata.ScramCredential{cred}, nil))
	// A state-dependent error crosses the RPC with its sentinel.
	errs := f.AlterScramCredentials(ctx, nil, []metadata.ScramDeletion{{User: "nobody", Mechanism: metadata.ScramSHA256}})
	require.ErrorIs(t, errs[0], metadata.ErrResourceNotFound)
	require.Equal(t, []error{nil}, f.AlterClientQuotas(ctx, []metadata.ClientQuotaAlteration{
		{Entity: quotaEntity("user", "alice"), Ops: []metadata.ClientQuotaOp{{Key: "producer_byte_rate", Value: 10}}}}, false))
	for _, c := range tc.nodes {
		require.Eventually(t, func() bool {
			bs, _ := c.ACLs()
			qs, _ := c.ClientQuotas()
			_, ok := c.ScramCredential("alice", metadata.ScramSHA256)
			return len(bs) == 1 && bs[0] == b && len(qs) == 1 && ok
		}, 10*time.Second, 10*time.Millisecond, "node %d", c.NodeID())
	}
	deleted, errs := f.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny,
		Operation: acl.OpAny, Permission: acl.PermissionAny}})
	require.Equal(t, []error{nil}, errs)
	require.Equal(t, [][]acl.Binding{{b}}, deleted)
	for _, c := range tc.nodes {
		require.Eventually(t, func() bool { bs, _ := c.ACLs(); return len(bs) == 0 }, 10*time.Second, 10*time.Millisecond)
	}
}

// FuzzApplySecurityEntry feeds arbitrary entries of security records to
// decode and apply: rejected with an error, never a panic, and what
// applies leaves a state that holds only valid values.
func FuzzApplySecurityEntry(f *testing.F) {
	cred := scramCred(f, "u", metadata.ScramSHA256, "pw", 4096)
	v := 10.0
	for _, recs := range [][]record{
		{&aclRecord{Binding: topicACL("User:a", "t", acl.OpRead, acl.PermissionAllow)}},
		{&aclRecord{Binding: topicACL("User:a", "t", acl.OpRead, acl.PermissionAllow)}, &removeACLRecord{Binding: topicACL("User:a", "t", acl.OpRead, acl.PermissionAllow)}},
		{&scramCredentialRecord{User: cred.User, Mechanism: cred.Mechanism, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations}},
		{&removeScramCredentialRecord{User: "u", Mechanism: metadata.ScramSHA256}},
		{&clientQuotaRecord{Entity: quotaEntity("user", "a"), Key: "producer_byte_rate", Value: &v}},
		{&clientQuotaRecord{Entity: quotaEntity("ip", "<default>"), Key: "connection_creation_rate"}},
	} {
		b, err := encodeRecords(recs)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st := newState()
		recs, err := decodeEntry(b, &st)
		if err != nil {
			return
		}
		x, err := applyRecords(&st, recs)
		if err != nil {
			return
		}
		x.mutate(&st)
		if x.sec != nil {
			x.sec.mutate(&st.sec, 1)
		}
		for _, bd := range st.sec.acls {
			require.NoError(t, metadata.ValidateACLBinding(bd))
		}
		for _, c := range st.sec.scram {
			require.NoError(t, validateScramCredential(c))
		}
		for _, q := range st.sec.quotaList {
			require.NotEmpty(t, q.Values)
			for k, v := range q.Values {
				require.NoError(t, metadata.ValidateQuotaValue(q.Entity, k, v))
			}
		}
	})
}

// TestACLsManyInBoundedEntries: more bindings than one entry holds are
// created and deleted in several entries, all of them.
func TestACLsManyInBoundedEntries(t *testing.T) {
	c, _ := openTest(t)
	ctx := testCtx(t)
	n := 2*maxBindingsPerEntry + 17
	bs := make([]acl.Binding, n)
	for i := range bs {
		bs[i] = topicACL(fmt.Sprintf("User:u%05d", i), "t", acl.OpRead, acl.PermissionAllow)
	}
	first := c.AppliedIndex()
	for i, err := range c.CreateACLs(ctx, bs) {
		require.NoError(t, err, i)
	}
	require.EqualValues(t, 3, c.AppliedIndex()-first, "three entries")
	got, _ := c.ACLs()
	require.Len(t, got, n)
	deleted, errs := c.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, ResourceName: strp("t"),
		PatternType: acl.PatternLiteral, Operation: acl.OpRead, Permission: acl.PermissionAllow}})
	require.Equal(t, []error{nil}, errs)
	require.Len(t, deleted[0], n)
	got, _ = c.ACLs()
	require.Empty(t, got)
}
