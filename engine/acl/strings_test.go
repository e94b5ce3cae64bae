package acl

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnusableBindings: bindings a check can never match are not
// indexed (the controller refuses them anyway).
func TestUnusableBindings(t *testing.T) {
	ok := allow(ResourceTopic, "t", PatternLiteral, "User:a", "*", OpRead)
	require.True(t, usable(ok))
	for i, mutate := range []func(*Binding){
		func(b *Binding) { b.ResourceType = ResourceAny },
		func(b *Binding) { b.ResourceType = 42 },
		func(b *Binding) { b.PatternType = PatternMatch },
		func(b *Binding) { b.Operation = OpAny },
		func(b *Binding) { b.Permission = PermissionAny },
		func(b *Binding) { b.ResourceName = "" },
		func(b *Binding) { b.Host = "" },
		func(b *Binding) { b.Principal = "alice" },
	} {
		b := ok
		mutate(&b)
		require.False(t, usable(b), "case %d", i)
		require.Equal(t, DeniedNoMatch, New([]Binding{b}, Options{}).Authorize("User:a", "h", OpRead, ResourceTopic, "t"), "case %d", i)
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
