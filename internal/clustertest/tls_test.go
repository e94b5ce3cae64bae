package clustertest

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/moonmq/moonmq/internal/cluster"
	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/internal/testcerts"
)

// TestTLSCluster: a cluster on SSL with mTLS stays secured inside. Raft and
// the controller RPC run over TLS on the cluster port, the followers fetch
// from their leaders over TLS presenting the node's certificate (the Kafka
// listener requires one), so an acks=all produce to a replicated topic
// works end to end; a node whose certificate another CA signed cannot
// join: its dials are refused and it never becomes ready, while the two
// others form the quorum without it.
func TestTLSCluster(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "cluster ca")
	nodeCert, nodeKey := ca.Server(t, "broker").Write(t, dir, "node")
	caFile := ca.Write(t, dir, "ca")
	rogueCA := testcerts.NewCA(t, "rogue ca")
	rogueCert, rogueKey := rogueCA.Server(t, "broker").Write(t, dir, "rogue")
	rogueCAFile := rogueCA.Write(t, dir, "rogue-ca")

	c := cluster.New(t, cluster.Options{Nodes: 3, Flags: []string{"--security-protocol", "SSL", "--default-replication-factor", "2",
		"--gossip-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "--superusers", "User:app"},
		NodeFlags: func(i int) []string {
			if i == 2 {
				return []string{"--tls-cert", rogueCert, "--tls-key", rogueKey, "--tls-client-ca", rogueCAFile}
			}
			return []string{"--tls-cert", nodeCert, "--tls-key", nodeKey, "--tls-client-ca", caFile}
		}})
	c.LaunchAll()
	c.WaitReady(1)
	c.WaitReady(2)

	client := ca.Client(t, pkix.Name{CommonName: "app"}).TLS(t)
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client}})
	cl, _ := c.Client(tlsOpt, quickMetadata)
	ctx := ctxT(t, 2*time.Minute)
	const topic, n = "secure", 200
	createTopic(t, cl, topic, 2, 2, nil)
	pr, _ := c.Client(tlsOpt, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range n {
		require.NoError(t, pr.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr())
	}
	co, _ := c.Client(tlsOpt, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < n {
		fs := co.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	// Both replicas of each partition stayed in sync: the followers fetch
	// over mTLS.
	waitHealthy(t, cl, topic, 2, 2, 30*time.Second)

	// The rogue node: refused by the others' cluster ports (it does not
	// trust them either), so not ready.
	testbroker.WaitFor(t, 60*time.Second, "the rogue node to log a refused certificate", func() bool {
		return strings.Contains(c.Node(3).Log(), "certificate signed by unknown authority")
	})
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.False(t, c.Node(3).Ready(rctx), "a node with the wrong certificate joined")
	for _, id := range []int32{1, 2} {
		require.Contains(t, c.Node(id).Log(), "cluster port: no protocol byte", "node %d refused a handshake", id)
	}
}

// TestSASLSSLCluster: a three-node SASL_SSL cluster. The nodes log in to
// each other's listeners as the inter-broker user (followers fetch and
// transaction markers go through SCRAM over mTLS), so an acks=all produce
// to a replication-factor-3 topic completes and every replica stays in
// sync; a client needs a user: a wrong password is refused, an
// authenticated user without ACLs is denied, the super user is served.
func TestSASLSSLCluster(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "cluster ca")
	nodeCert, nodeKey := ca.Server(t, "broker").Write(t, dir, "node")
	caFile := ca.Write(t, dir, "ca")
	c := cluster.New(t, cluster.Options{Nodes: 3, Flags: []string{"--security-protocol", "SASL_SSL",
		"--tls-cert", nodeCert, "--tls-key", nodeKey, "--tls-client-ca", caFile, "--tls-client-auth", "requested",
		"--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", "--inter-broker-user", "broker:br0ker-pw",
		"--gossip-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"--bootstrap-user", "admin:adm1n-pw", "--bootstrap-user", "alice:al1ce-pw", "--superusers", "User:admin"}})
	c.LaunchAll()
	for id := int32(1); id <= 3; id++ {
		c.WaitReady(id)
	}
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool()})
	as := func(user, pw string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha512Mechanism())
	}
	cl, _ := c.Client(tlsOpt, as("admin", "adm1n-pw"), quickMetadata)
	ctx := ctxT(t, 2*time.Minute)
	const topic, n = "secure3", 300
	createTopic(t, cl, topic, 3, 3, nil)
	pr, _ := c.Client(tlsOpt, as("admin", "adm1n-pw"), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range n {
		require.NoError(t, pr.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr())
	}
	waitHealthy(t, cl, topic, 3, 3, 30*time.Second)
	co, _ := c.Client(tlsOpt, as("admin", "adm1n-pw"), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < n {
		fs := co.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}

	// A wrong password is refused; alice logs in but no ACL lets her write.
	bad, _ := c.Client(tlsOpt, as("admin", "wrong"), kgo.DefaultProduceTopic(topic), kgo.RecordRetries(0))
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.Error(t, bad.ProduceSync(bctx, &kgo.Record{Value: []byte("x")}).FirstErr())
	alice, _ := c.Client(tlsOpt, as("alice", "al1ce-pw"), kgo.DefaultProduceTopic(topic))
	err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
}
