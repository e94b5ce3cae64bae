package client

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// testAddrEnv lets the same tests run against a real broker (e.g. a MoonMQ
// node): MOONMQ_TEST_ADDR=127.0.0.1:9092 go test ./net/client/...
// Tests that need kfake-only control are skipped then.
const testAddrEnv = "MOONMQ_TEST_ADDR"

// testCtx returns a context bounded so a hung call fails the test instead of
// stalling the suite.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newTestClient starts a kfake cluster (or uses MOONMQ_TEST_ADDR) and dials
// it.
func newTestClient(t *testing.T, opts ...kfake.Opt) *Client {
	t.Helper()
	addr := os.Getenv(testAddrEnv)
	if addr == "" {
		c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		addr = c.ListenAddrs()[0]
	}
	cl, err := Dial(testCtx(t), Options{Addr: addr, ClientID: "client-test", RequestTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func requireKfake(t *testing.T) {
	t.Helper()
	if os.Getenv(testAddrEnv) != "" {
		t.Skip("needs the in-process fake cluster")
	}
}

// uniqueTopic avoids collisions when running against a shared real broker.
func uniqueTopic(t *testing.T, base string) string {
	return fmt.Sprintf("%s-%d", base, time.Now().UnixNano()%1_000_000_000)
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		addr, want string
	}{
		{"", "no broker address (want host:port)"},
		{" , ", "no broker address (want host:port)"},
		{"localhost", `broker address "localhost" has no port (want host:port)`},
		{"a:1,b", `broker address "b" has no port (want host:port)`},
	} {
		o := Options{Addr: tc.addr}
		o.EnsureDefaults()
		err := o.Validate()
		require.ErrorIs(t, err, ErrInvalidArgument, tc.addr)
		// The reason alone: callers say what it was for.
		require.EqualError(t, err, tc.want)
	}
	o := Options{Addr: "a:1, b:2"}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	require.Equal(t, []string{"a:1", "b:2"}, o.seeds())
	require.Equal(t, DefaultClientID, o.ClientID)
	require.Equal(t, DefaultRequestTimeout, o.RequestTimeout)
}

func TestDialUnreachable(t *testing.T) {
	// Grab a free port and close it so nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	_, err = Dial(testCtx(t), Options{Addr: addr, DialTimeout: time.Second, RequestTimeout: 2 * time.Second})
	require.Error(t, err)
	require.ErrorIs(t, err, ErrUnreachable)
	require.Contains(t, Explain(err), "connection refused")
	require.Contains(t, err.Error(), addr)
}

func TestDialNotKafka(t *testing.T) {
	// A listener that accepts and immediately closes: not a Kafka broker.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, err = Dial(testCtx(t), Options{Addr: ln.Addr().String(), DialTimeout: time.Second, RequestTimeout: 2 * time.Second})
	require.ErrorIs(t, err, ErrUnreachable)
	require.Contains(t, Explain(err), "is that address a Kafka broker?")
}

func TestCluster(t *testing.T) {
	requireKfake(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID("moon-cluster"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cl, err := Dial(testCtx(t), Options{Addr: c.ListenAddrs()[0]})
	require.NoError(t, err)
	t.Cleanup(cl.Close)

	info, err := cl.Cluster(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, "moon-cluster", info.ID)
	require.Len(t, info.Brokers, 3)
	require.GreaterOrEqual(t, info.Controller, int32(0))
	for i := 1; i < len(info.Brokers); i++ {
		require.Less(t, info.Brokers[i-1].ID, info.Brokers[i].ID)
	}
	brokers, err := cl.Brokers(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, info.Brokers, brokers)
	require.Equal(t, "127.0.0.1", brokers[0].Host)
	require.Positive(t, brokers[0].Port)
}

func TestClosedClient(t *testing.T) {
	cl := newTestClient(t)
	cl.Close()
	cl.Close() // idempotent
	_, err := cl.ListTopics(testCtx(t))
	require.ErrorIs(t, err, ErrClosed)
	require.Equal(t, "the client is closed", Explain(err))
	_, err = cl.Produce(testCtx(t), "t", []Record{{Partition: AnyPartition}})
	require.ErrorIs(t, err, ErrClosed)
}
