package acl

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	ok := allow(ResourceTopic, "t", PatternLiteral, "User:a", "*", OpRead)
	require.NoError(t, Validate(ok))
	require.NoError(t, Validate(allow(ResourceCluster, ClusterName, PatternLiteral, "User:a", "*", OpAlter)))
	require.NoError(t, Validate(allow(ResourceTopic, "*", PatternLiteral, "User:*", "*", OpAll)))
	bad := []func(*Binding){
		func(b *Binding) { b.ResourceType = ResourceAny },
		func(b *Binding) { b.ResourceType = ResourceUnknown },
		func(b *Binding) { b.ResourceType = 42 },
		func(b *Binding) { b.PatternType = PatternMatch },
		func(b *Binding) { b.PatternType = PatternAny },
		func(b *Binding) { b.PatternType = PatternUnknown },
		func(b *Binding) { b.Operation = OpAny },
		func(b *Binding) { b.Operation = OpUnknown },
		func(b *Binding) { b.Operation = 15 },
		func(b *Binding) { b.Permission = PermissionAny },
		func(b *Binding) { b.Permission = PermissionUnknown },
		func(b *Binding) { b.ResourceName = "" },
		func(b *Binding) { b.ResourceType = ResourceCluster; b.ResourceName = "my-cluster" },
		func(b *Binding) { b.Principal = "alice" },
	}
	for i, mutate := range bad {
		b := ok
		mutate(&b)
		err := Validate(b)
		require.ErrorIs(t, err, ErrInvalid, "case %d: %+v", i, b)
	}
}

func TestFilterValidate(t *testing.T) {
	any := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	require.NoError(t, any.Validate())
	m := any
	m.PatternType = PatternMatch
	require.NoError(t, m.Validate())
	for _, mutate := range []func(*Filter){
		func(f *Filter) { f.ResourceType = ResourceUnknown },
		func(f *Filter) { f.PatternType = PatternUnknown },
		func(f *Filter) { f.Operation = OpUnknown },
		func(f *Filter) { f.Permission = PermissionUnknown },
		func(f *Filter) { f.Operation = 20 },
	} {
		f := any
		mutate(&f)
		require.ErrorIs(t, f.Validate(), ErrInvalid)
	}
}

func str(s string) *string { return &s }

// TestFilterMatches follows Kafka's ResourcePatternFilterTest and
// AclBindingFilterTest.
func TestFilterMatches(t *testing.T) {
	lit := allow(ResourceTopic, "Name", PatternLiteral, "User:a", "h", OpRead)
	wild := allow(ResourceTopic, "*", PatternLiteral, "User:a", "h", OpRead)
	pre := allow(ResourceTopic, "Na", PatternPrefixed, "User:a", "h", OpRead)
	anyF := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	with := func(mut func(*Filter)) Filter { f := anyF; mut(&f); return f }
	tests := []struct {
		name string
		f    Filter
		b    Binding
		want bool
	}{
		{"any matches all", anyF, lit, true},
		{"resource type", with(func(f *Filter) { f.ResourceType = ResourceGroup }), lit, false},
		{"resource type equal", with(func(f *Filter) { f.ResourceType = ResourceTopic }), lit, true},
		{"pattern type", with(func(f *Filter) { f.PatternType = PatternPrefixed }), lit, false},
		{"ANY name exact", with(func(f *Filter) { f.ResourceName = str("Name") }), lit, true},
		{"ANY name other", with(func(f *Filter) { f.ResourceName = str("Name2") }), lit, false},
		{"ANY name does not expand a wildcard", with(func(f *Filter) { f.ResourceName = str("Name") }), wild, false},
		{"ANY name does not expand a prefix", with(func(f *Filter) { f.ResourceName = str("Name") }), pre, false},
		{"LITERAL name exact", with(func(f *Filter) { f.PatternType = PatternLiteral; f.ResourceName = str("Name") }), lit, true},
		{"LITERAL wildcard only by its name", with(func(f *Filter) { f.PatternType = PatternLiteral; f.ResourceName = str("*") }), wild, true},
		{"LITERAL * is not every literal", with(func(f *Filter) { f.PatternType = PatternLiteral; f.ResourceName = str("*") }), lit, false},
		{"PREFIXED exact prefix", with(func(f *Filter) { f.PatternType = PatternPrefixed; f.ResourceName = str("Na") }), pre, true},
		{"PREFIXED is not a prefix search", with(func(f *Filter) { f.PatternType = PatternPrefixed; f.ResourceName = str("Name") }), pre, false},
		{"MATCH literal", with(func(f *Filter) { f.PatternType = PatternMatch; f.ResourceName = str("Name") }), lit, true},
		{"MATCH wildcard", with(func(f *Filter) { f.PatternType = PatternMatch; f.ResourceName = str("Name") }), wild, true},
		{"MATCH prefix", with(func(f *Filter) { f.PatternType = PatternMatch; f.ResourceName = str("Name") }), pre, true},
		{"MATCH prefix longer than name", with(func(f *Filter) { f.PatternType = PatternMatch; f.ResourceName = str("N") }), pre, false},
		{"MATCH other literal", with(func(f *Filter) { f.PatternType = PatternMatch; f.ResourceName = str("Other") }), lit, false},
		{"MATCH without name", with(func(f *Filter) { f.PatternType = PatternMatch }), pre, true},
		{"principal", with(func(f *Filter) { f.Principal = str("User:b") }), lit, false},
		{"principal equal", with(func(f *Filter) { f.Principal = str("User:a") }), lit, true},
		{"principal wildcard is literal", with(func(f *Filter) { f.Principal = str("User:*") }), lit, false},
		{"host", with(func(f *Filter) { f.Host = str("other") }), lit, false},
		{"host equal", with(func(f *Filter) { f.Host = str("h") }), lit, true},
		{"operation", with(func(f *Filter) { f.Operation = OpWrite }), lit, false},
		{"operation ALL is literal", with(func(f *Filter) { f.Operation = OpAll }), lit, false},
		{"operation equal", with(func(f *Filter) { f.Operation = OpRead }), lit, true},
		{"permission", with(func(f *Filter) { f.Permission = PermissionDeny }), lit, false},
		{"permission equal", with(func(f *Filter) { f.Permission = PermissionAllow }), lit, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.f.Matches(tt.b))
		})
	}
}

func TestStrings(t *testing.T) {
	require.Equal(t, "TRANSACTIONAL_ID", ResourceTransactionalID.String())
	require.Equal(t, "IDEMPOTENT_WRITE", OpIdempotentWrite.String())
	require.Equal(t, "Operation(99)", Operation(99).String())
	require.Equal(t, "PREFIXED", PatternPrefixed.String())
	require.Equal(t, "DENY", PermissionDeny.String())
	require.Equal(t, "allowed: super user", AllowedSuperUser.String())
}
