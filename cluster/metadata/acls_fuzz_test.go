package metadata

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/acl"
)

// FuzzACLBindingAndFilter: any binding or filter is validated without a
// panic; a valid binding is matched by the filter that names each of its
// fields, and by the match-everything filter.
func FuzzACLBindingAndFilter(f *testing.F) {
	f.Add(int8(2), "orders", int8(3), "User:alice", "*", int8(3), int8(3), int8(2), "orders-eu", int8(2))
	f.Add(int8(4), "kafka-cluster", int8(4), "User:*", "10.0.0.1", int8(2), int8(2), int8(1), "", int8(1))
	f.Add(int8(0), "", int8(0), ":", "", int8(0), int8(0), int8(0), "x", int8(9))
	f.Fuzz(func(t *testing.T, rt int8, name string, pt int8, principal, host string, op, perm, frt int8, fname string, fpt int8) {
		b := acl.Binding{ResourceType: acl.ResourceType(rt), ResourceName: name, PatternType: acl.PatternType(pt),
			Principal: principal, Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm)}
		fl := acl.Filter{ResourceType: acl.ResourceType(frt), ResourceName: &fname, PatternType: acl.PatternType(fpt),
			Operation: acl.OpAny, Permission: acl.PermissionAny}
		_ = ValidateACLFilter(fl)
		_ = ACLFilterMatches(fl, b)
		if ValidateACLBinding(b) != nil {
			return
		}
		all := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
		require.NoError(t, ValidateACLFilter(all))
		require.True(t, ACLFilterMatches(all, b))
		exact := acl.Filter{ResourceType: b.ResourceType, ResourceName: &b.ResourceName, PatternType: b.PatternType,
			Principal: &b.Principal, Host: &b.Host, Operation: b.Operation, Permission: b.Permission}
		require.NoError(t, ValidateACLFilter(exact))
		require.True(t, ACLFilterMatches(exact, b))
		require.Zero(t, CompareACLBindings(b, b))
	})
}

// FuzzQuotaEntity: any entity and value is validated without a panic; a
// canonical entity is canonical again, with the same key.
func FuzzQuotaEntity(f *testing.F) {
	f.Add("user", "alice", true, "client-id", "app", false, "producer_byte_rate", 1024.0)
	f.Add("ip", "10.0.0.1", true, "", "", false, "connection_creation_rate", 5.0)
	f.Add("user", "", false, "user", "x", true, "request_percentage", -1.0)
	f.Add("client-id", "b", true, "client-id", "b\x00user=a", true, "producer_byte_rate", 1.0)
	f.Fuzz(func(t *testing.T, t1, n1 string, named1 bool, t2, n2 string, named2 bool, key string, value float64) {
		part := func(typ, name string, named bool) QuotaEntityPart {
			p := QuotaEntityPart{Type: typ}
			if named {
				p.Name = &name
			}
			return p
		}
		entity := []QuotaEntityPart{part(t1, n1, named1)}
		if t2 != "" {
			entity = append(entity, part(t2, n2, named2))
		}
		canon, err := CanonicalQuotaEntity(entity)
		if err != nil {
			return
		}
		again, err := CanonicalQuotaEntity(canon)
		require.NoError(t, err)
		require.Equal(t, QuotaEntityKey(canon), QuotaEntityKey(again))
		// Keys are injective: another entity (the second part alone) has
		// the same key only if it is the same entity.
		if other, err := CanonicalQuotaEntity([]QuotaEntityPart{part(t2, n2, named2)}); err == nil && QuotaEntityKey(other) == QuotaEntityKey(canon) {
			require.Equal(t, canon, other)
		}
		_ = ValidateQuotaValue(canon, key, value)
		require.NotEmpty(t, ValidQuotaKeys(canon))
	})
}

// TestQuotaEntityKeyInjective: a name holding the separator does not
// make an entity collide with a two-part one.
func TestQuotaEntityKeyInjective(t *testing.T) {
	s := func(v string) *string { return &v }
	two := []QuotaEntityPart{{Type: QuotaEntityClientID, Name: s("b")}, {Type: QuotaEntityUser, Name: s("a")}}
	for _, name := range []string{"b\x00user=a", "b\x00user=\"a\""} {
		one := []QuotaEntityPart{{Type: QuotaEntityClientID, Name: s(name)}}
		require.NotEqual(t, QuotaEntityKey(two), QuotaEntityKey(one))
	}
	require.NotEqual(t, QuotaEntityKey([]QuotaEntityPart{{Type: QuotaEntityUser}}),
		QuotaEntityKey([]QuotaEntityPart{{Type: QuotaEntityUser, Name: s("")}}))
}
