package kafka

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
)

// TestClusterGate: the security admin APIs need their cluster operation
// (Kafka's): refused requests are answered with every item
// CLUSTER_AUTHORIZATION_FAILED; allowed ones, and every request when
// authorization is off, go to their handlers.
func TestClusterGate(t *testing.T) {
	bindings := []acl.Binding{
		{ResourceType: acl.ResourceCluster, ResourceName: acl.ClusterName, PatternType: acl.PatternLiteral,
			Principal: "User:auditor", Host: "*", Operation: acl.OpDescribe, Permission: acl.PermissionAllow},
		{ResourceType: acl.ResourceCluster, ResourceName: acl.ClusterName, PatternType: acl.PatternLiteral,
			Principal: "User:auditor", Host: "*", Operation: acl.OpDescribeConfigs, Permission: acl.PermissionAllow},
	}
	s := &Server{opts: Options{Authz: AuthzOptions{Enabled: true, SuperUsers: []string{"User:admin"},
		ACLs: func() ([]acl.Binding, uint64) { return bindings, 1 }}}, log: slog.New(slog.DiscardHandler)}
	as := func(principal string) *conn { return &conn{s: s, principal: principal, host: "10.0.0.1"} }
	req := func(k kmsg.Request) *request { return &request{key: k.Key(), kreq: k} }
	denied := kerr.ClusterAuthorizationFailed.Code

	describeACLs := kmsg.NewPtrDescribeACLsRequest()
	createACLs := kmsg.NewPtrCreateACLsRequest()
	createACLs.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	deleteACLs := kmsg.NewPtrDeleteACLsRequest()
	deleteACLs.Filters = make([]kmsg.DeleteACLsRequestFilter, 3)
	describeQuotas := kmsg.NewPtrDescribeClientQuotasRequest()
	alterQuotas := kmsg.NewPtrAlterClientQuotasRequest()
	alterQuotas.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("u")}}}}
	describeScram := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	alterScram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alterScram.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "a"}, {Name: "b"}}
	alterScram.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "a"}, {Name: "c"}}

	alice := as("User:alice")
	resp := alice.clusterGate(req(describeACLs)).(*kmsg.DescribeACLsResponse)
	require.Equal(t, denied, resp.ErrorCode)
	cr := alice.clusterGate(req(createACLs)).(*kmsg.CreateACLsResponse)
	require.Len(t, cr.Results, 2)
	for _, r := range cr.Results {
		require.Equal(t, denied, r.ErrorCode)
	}
	dr := alice.clusterGate(req(deleteACLs)).(*kmsg.DeleteACLsResponse)
	require.Len(t, dr.Results, 3)
	require.Equal(t, denied, dr.Results[2].ErrorCode)
	require.Equal(t, denied, alice.clusterGate(req(describeQuotas)).(*kmsg.DescribeClientQuotasResponse).ErrorCode)
	aq := alice.clusterGate(req(alterQuotas)).(*kmsg.AlterClientQuotasResponse)
	require.Len(t, aq.Entries, 1)
	require.Equal(t, denied, aq.Entries[0].ErrorCode)
	require.Equal(t, "u", *aq.Entries[0].Entity[0].Name)
	require.Equal(t, denied, alice.clusterGate(req(describeScram)).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode)
	as2 := alice.clusterGate(req(alterScram)).(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	for _, r := range as2.Results {
		require.Equal(t, denied, r.ErrorCode)
		users = append(users, r.User)
	}
	require.Equal(t, []string{"a", "b", "c"}, users, "one result per user")

	// The auditor may describe, not alter; the super user may all.
	auditor := as("User:auditor")
	require.Nil(t, auditor.clusterGate(req(describeACLs)))
	require.Nil(t, auditor.clusterGate(req(describeQuotas)))
	require.Nil(t, auditor.clusterGate(req(describeScram)))
	require.NotNil(t, auditor.clusterGate(req(createACLs)))
	require.NotNil(t, auditor.clusterGate(req(alterQuotas)))
	require.NotNil(t, auditor.clusterGate(req(alterScram)))
	admin := as("User:admin")
	for _, k := range []kmsg.Request{describeACLs, createACLs, deleteACLs, describeQuotas, alterQuotas, describeScram, alterScram} {
		require.Nil(t, admin.clusterGate(req(k)), "%T", k)
	}
	// Other APIs are not gated here; with authorization off nothing is.
	require.Nil(t, alice.clusterGate(req(kmsg.NewPtrMetadataRequest())))
	s.opts.Authz.Enabled = false
	s.authz.Store(nil)
	require.Nil(t, alice.clusterGate(req(createACLs)))
}
