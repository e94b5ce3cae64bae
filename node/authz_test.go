package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/net/kafka"
)

// TestAuthzReadsControllerACLs: with authorization on, the listener
// enforces the ACLs in the metadata log, and sees them change.
// Connections here are unauthenticated (User:ANONYMOUS), which is enough
// to check the wiring; net/kafka's tests act as other principals.
func TestAuthzReadsControllerACLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := testConfig(t, t.TempDir())
	cfg.Authz = AuthzConfig{Enabled: true}
	n, err := Open(ctx, cfg)
	require.NoError(t, err)
	defer n.Close()
	select {
	case <-n.Ready():
	case <-ctx.Done():
		t.Fatal("the node never became ready")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.DisableIdempotentWrite(),
		kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)

	_, err = adm.CreateTopic(ctx, 1, 1, nil, "t")
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed, "no ACL: denied")

	anyone := func(rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
		return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: acl.PatternLiteral,
			Principal: kafka.AnonymousPrincipal, Host: "*", Operation: op, Permission: acl.PermissionAllow}
	}
	for _, err := range n.ctrl.CreateACLs(ctx, []acl.Binding{
		anyone(acl.ResourceCluster, acl.ClusterName, acl.OpCreate),
		anyone(acl.ResourceTopic, "t", acl.OpWrite),
	}) {
		require.NoError(t, err)
	}
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "t")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "u")
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("a")}).FirstErr())
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "u", Value: []byte("a")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)

	deleted, errs := n.ctrl.DeleteACLs(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny,
		Operation: acl.OpAny, Permission: acl.PermissionAny}})
	require.NoError(t, errs[0])
	require.Len(t, deleted[0], 1)
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("b")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed, "the deletion applies at once")
}
