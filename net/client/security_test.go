package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUsers(t *testing.T) {
	requireKfake(t) // MoonMQ has no SCRAM users yet
	cl := newTestClient(t)
	ctx := testCtx(t)

	require.ErrorIs(t, cl.UpsertUser(ctx, "", "", "pw-123456", 0), ErrInvalidArgument)
	require.ErrorIs(t, cl.UpsertUser(ctx, "alice", "MD5", "pw-123456", 0), ErrInvalidArgument)
	require.NoError(t, cl.UpsertUser(ctx, "alice", "", "pw-123456", 0))
	require.NoError(t, cl.UpsertUser(ctx, "alice", "scram-sha-512", "pw-123456", 4096))
	require.NoError(t, cl.UpsertUser(ctx, "bob", ScramSHA256, "pw-123456", 0))

	users, err := cl.ListUsers(ctx)
	require.NoError(t, err)
	require.Equal(t, []UserCredential{
		{User: "alice", Mechanism: ScramSHA256, Iterations: DefaultScramIterations},
		{User: "alice", Mechanism: ScramSHA512, Iterations: 4096},
		{User: "bob", Mechanism: ScramSHA256, Iterations: DefaultScramIterations},
	}, users)

	require.NoError(t, cl.DeleteUser(ctx, "alice", ScramSHA512))
	require.NoError(t, cl.DeleteUser(ctx, "bob"))
	users, err = cl.ListUsers(ctx)
	require.NoError(t, err)
	require.Equal(t, []UserCredential{{User: "alice", Mechanism: ScramSHA256, Iterations: DefaultScramIterations}}, users)

	err = cl.DeleteUser(ctx, "bob")
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, "user 'bob' does not exist", Explain(err))
	require.Equal(t, "RESOURCE_NOT_FOUND", ErrorName(err))
}

func TestACLs(t *testing.T) {
	requireKfake(t) // MoonMQ has no ACLs yet
	cl := newTestClient(t)
	ctx := testCtx(t)

	require.True(t, IsACLOperation("read"))
	require.False(t, IsACLOperation("fly"))
	require.Equal(t, "User:alice", Principal("alice"))
	require.Equal(t, "Group:ops", Principal("Group:ops"))

	orders := ACLResource{Type: "topic", Name: "orders", Prefixed: true}
	require.ErrorIs(t, cl.Grant(ctx, "alice", []string{"fly"}, orders), ErrInvalidArgument)
	require.ErrorIs(t, cl.Grant(ctx, "alice", nil, orders), ErrInvalidArgument)
	require.ErrorIs(t, cl.Grant(ctx, "", []string{"READ"}, orders), ErrInvalidArgument)
	require.ErrorIs(t, cl.Grant(ctx, "alice", []string{"READ"}, ACLResource{Type: "planet"}), ErrInvalidArgument)

	require.NoError(t, cl.Grant(ctx, "alice", []string{"read", "WRITE"}, orders))
	require.NoError(t, cl.Grant(ctx, "bob", []string{"DESCRIBE"}, ACLResource{Type: "cluster"}))
	require.NoError(t, cl.Grant(ctx, "bob", []string{"READ"}, ACLResource{Type: "group", Name: "billing"}))

	acls, err := cl.ListACLs(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, []ACL{
		{Principal: "User:alice", Host: "*", ResourceType: "topic", ResourceName: "orders", Pattern: "prefixed", Operation: "READ", Permission: "allow"},
		{Principal: "User:alice", Host: "*", ResourceType: "topic", ResourceName: "orders", Pattern: "prefixed", Operation: "WRITE", Permission: "allow"},
	}, acls)
	all, err := cl.ListACLs(ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 4)

	n, err := cl.Revoke(ctx, "alice", []string{"WRITE"}, orders)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = cl.Revoke(ctx, "alice", []string{"WRITE"}, orders)
	require.NoError(t, err)
	require.Equal(t, 0, n, "revoking what is not granted removes nothing")
	acls, err = cl.ListACLs(ctx, "User:alice")
	require.NoError(t, err)
	require.Len(t, acls, 1)
	require.Equal(t, "READ", acls[0].Operation)
}

func TestReassignments(t *testing.T) {
	requireKfake(t) // MoonMQ has no reassignments yet
	cl := newTestClient(t)
	ctx := testCtx(t)
	rs, err := cl.ListReassignments(ctx)
	require.NoError(t, err)
	require.Empty(t, rs)
	require.ErrorIs(t, cl.MovePartition(ctx, "t", 0, nil), ErrInvalidArgument)
}
