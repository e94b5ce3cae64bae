package kafka_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/testcerts"
	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/node"
)

// tlsSetup is a CA, a broker certificate for 127.0.0.1 and their files.
type tlsSetup struct {
	ca               *testcerts.CA
	dir              string
	cert, key, caPEM string
	server           *testcerts.Pair
}

func newTLSSetup(t *testing.T) *tlsSetup {
	s := &tlsSetup{ca: testcerts.NewCA(t, "test ca"), dir: t.TempDir()}
	s.server = s.ca.Server(t, "broker")
	s.cert, s.key = s.server.Write(t, s.dir, "server")
	s.caPEM = s.ca.Write(t, s.dir, "ca")
	return s
}

// startTLSServer runs a node whose listener speaks protocol with the
// setup's files and opts' client-certificate settings.
func startTLSServer(t *testing.T, s *tlsSetup, protocol kafka.SecurityProtocol, opts auth.TLSOptions) *server {
	opts.CertFile, opts.KeyFile = s.cert, s.key
	return startServer(t, node.Config{SecurityProtocol: protocol, TLS: opts})
}

// clientTLS trusts the setup's CA and presents cert (nil: none) whatever
// CAs the server names.
func clientTLS(t *testing.T, ca *testcerts.CA, cert *testcerts.Pair) *tls.Config {
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		c := cert.TLS(t)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	return cfg
}

// produceConsume produces n records to topic with a kgo client over cfg
// and reads them back; the first error is returned (a refused client
// fails its first request).
func produceConsume(t *testing.T, s *server, cfg *tls.Config, topic string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DialTLSConfig(cfg),
		kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic), kgo.AllowAutoTopicCreation(),
		kgo.RequestRetries(1), kgo.RetryTimeout(3*time.Second))
	require.NoError(t, err)
	defer cl.Close()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			return err
		}
	}
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i := range n {
		require.Equal(t, fmt.Sprintf("v%d", i), got[i])
	}
	return nil
}

func TestSSLProduceConsume(t *testing.T) {
	s := newTLSSetup(t)
	srv := startTLSServer(t, s, kafka.ProtocolSSL, auth.TLSOptions{})
	createTopicTLS(t, srv, clientTLS(t, s.ca, nil), "ssl")
	require.NoError(t, produceConsume(t, srv, clientTLS(t, s.ca, nil), "ssl", 20))
	principals, certPrincipals := livePrincipals(t, srv, clientTLS(t, s.ca, nil))
	for i := range principals {
		require.Equal(t, kafka.AnonymousPrincipal, principals[i], "no client certificate: anonymous")
		require.Empty(t, certPrincipals[i])
	}
	require.Positive(t, srv.k.TLSHandshakes())

	// A client that does not trust the broker's CA gives up.
	other := testcerts.NewCA(t, "other")
	require.ErrorContains(t, tlsAPIVersions(srv, clientTLS(t, other, nil)), "certificate signed by unknown authority")
	require.NoError(t, tlsAPIVersions(srv, clientTLS(t, s.ca, nil)))
	// A plaintext client is refused (its request is not a TLS hello).
	raw, err := net.Dial("tcp", srv.Addr().String())
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.Write([]byte{0, 0, 0, 20, 0, 18, 0, 3, 0, 0, 0, 1, 0, 4, 't', 'e', 's', 't', 0, 0, 0, 0, 0, 0})
	require.NoError(t, err)
	requireClosed(t, raw)
	eventually(t, "the TLS metrics and producer to catch up", 15*time.Second, func() bool { return srv.k.TLSHandshakeFailures("not_tls") >= 1 })
}

// tlsAPIVersions sends one ApiVersions request on a new TLS connection and
// reads its answer: a refused client fails here (under TLS 1.3 a refused
// client certificate shows at the client's first read, not its handshake).
func tlsAPIVersions(s *server, cfg *tls.Config) error {
	d := &tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 5 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", s.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	body := kafka.EncodeRequest(req, 1)
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(size[:])))
	return err
}

// livePrincipals connects a kgo client with cfg and returns the
// principals of the server's TLS connections while it is connected.
func livePrincipals(t *testing.T, s *server, cfg *tls.Config) (principals, certPrincipals []string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DialTLSConfig(cfg))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.Ping(ctx))
	principals, certPrincipals = s.k.ConnPrincipals()
	require.NotEmpty(t, principals)
	return principals, certPrincipals
}

// createTopicTLS creates a one-partition topic over TLS.
func createTopicTLS(t *testing.T, s *server, cfg *tls.Config, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DialTLSConfig(cfg))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.Ping(ctx))
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

func TestMTLS(t *testing.T) {
	s := newTLSSetup(t)
	// The default with a client CA is required.
	srv := startTLSServer(t, s, kafka.ProtocolSSL, auth.TLSOptions{ClientCAFile: s.caPEM})
	alice := s.ca.Client(t, pkix.Name{CommonName: "alice", Organization: []string{"apps"}})
	createTopicTLS(t, srv, clientTLS(t, s.ca, alice), "mtls")
	require.NoError(t, produceConsume(t, srv, clientTLS(t, s.ca, alice), "mtls", 10))
	principals, certPrincipals := livePrincipals(t, srv, clientTLS(t, s.ca, alice))
	for i := range principals {
		require.Equal(t, "User:alice", principals[i], "SSL: the certificate's CN")
		require.Equal(t, "User:alice", certPrincipals[i])
	}

	// No certificate, or one of another CA: refused, counted.
	require.Error(t, tlsAPIVersions(srv, clientTLS(t, s.ca, nil)))
	eventually(t, "the TLS metrics and producer to catch up", 15*time.Second, func() bool { return srv.k.TLSHandshakeFailures("no_client_certificate") >= 1 })
	mallory := testcerts.NewCA(t, "rogue").Client(t, pkix.Name{CommonName: "alice"})
	require.Error(t, tlsAPIVersions(srv, clientTLS(t, s.ca, mallory)))
	require.NoError(t, tlsAPIVersions(srv, clientTLS(t, s.ca, alice)))
	eventually(t, "the TLS metrics and producer to catch up", 15*time.Second, func() bool { return srv.k.TLSHandshakeFailures("bad_client_certificate") >= 1 })
}

func TestPrincipalMappingRules(t *testing.T) {
	s := newTLSSetup(t)
	srv := startTLSServer(t, s, kafka.ProtocolSSL, auth.TLSOptions{ClientCAFile: s.caPEM,
		PrincipalMapping: "RULE:^CN=(.*?),OU=ServiceUsers.*$/svc-$1/L"})
	svc := s.ca.Client(t, pkix.Name{CommonName: "Billing", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Org"}})
	createTopicTLS(t, srv, clientTLS(t, s.ca, svc), "mapped")
	principals, _ := livePrincipals(t, srv, clientTLS(t, s.ca, svc))
	for _, p := range principals {
		require.Equal(t, "User:svc-billing", p)
	}

	// A certificate no rule maps is refused (Kafka fails to build its
	// principal and closes the connection).
	dev := s.ca.Client(t, pkix.Name{CommonName: "dev", OrganizationalUnit: []string{"Developers"}})
	require.Error(t, tlsAPIVersions(srv, clientTLS(t, s.ca, dev)))
	eventually(t, "the TLS metrics and producer to catch up", 15*time.Second, func() bool { return srv.k.TLSHandshakeFailures("principal_mapping") >= 1 })
}

// TestTLSReloadUnderLoad: a client producing without pause across reloads
// keeps its connections and never fails; a handshake after a good reload
// sees the new certificate; a bad file keeps the old one.
func TestTLSReloadUnderLoad(t *testing.T) {
	s := newTLSSetup(t)
	srv := startTLSServer(t, s, kafka.ProtocolSSL, auth.TLSOptions{ClientCAFile: s.caPEM})
	alice := s.ca.Client(t, pkix.Name{CommonName: "alice"})
	cfg := clientTLS(t, s.ca, alice)
	createTopicTLS(t, srv, cfg, "reload")

	var disconnects atomic.Int64
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr().String()), kgo.DialTLSConfig(cfg),
		kgo.DefaultProduceTopic("reload"), kgo.WithHooks(disconnectHook{&disconnects}))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		produced atomic.Int64
		failure  atomic.Pointer[error]
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
			if err != nil && ctx.Err() == nil {
				failure.Store(&err)
				return
			}
			produced.Add(1)
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	// waitProduced waits for the producer to get n more records through.
	waitProduced := func(n int64) {
		target := produced.Load() + n
		eventually(t, "the TLS metrics and producer to catch up", 15*time.Second, func() bool { return produced.Load() >= target || failure.Load() != nil })
		if p := failure.Load(); p != nil {
			t.Fatalf("the producer failed: %v", *p)
		}
	}
	waitProduced(50)

	serial := func() string {
		d := &tls.Dialer{Config: clientTLS(t, s.ca, alice)}
		c, err := d.DialContext(context.Background(), "tcp", srv.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	require.Equal(t, s.server.Cert.SerialNumber.String(), serial())

	for round := range 3 {
		next := s.ca.Server(t, "broker")
		next.Write(t, s.dir, "server")
		require.NoError(t, srv.n.ReloadTLS(), "round %d", round)
		require.Equal(t, next.Cert.SerialNumber.String(), serial(), "round %d: a new handshake sees the new certificate", round)
		waitProduced(50)
	}
	last := srv.n.TLS().Leaf().SerialNumber.String()

	// A bad certificate file: the reload fails, the old one stays.
	testcerts.WriteFile(t, s.cert, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"))
	require.Error(t, srv.n.ReloadTLS())
	require.Equal(t, last, serial())
	waitProduced(50)

	require.Zero(t, disconnects.Load(), "the producer's connections stayed up")
}

type disconnectHook struct{ n *atomic.Int64 }

func (h disconnectHook) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.n.Add(1) }

// TestTLSGarbageClosesOnlyThatConnection: bytes that are no TLS hello, and
// a client that never finishes its handshake, lose their own connection;
// the handshakes run beside the accept loop, so others connect meanwhile.
func TestTLSGarbageClosesOnlyThatConnection(t *testing.T) {
	s := newTLSSetup(t)
	srv := startServer(t, node.Config{SecurityProtocol: kafka.ProtocolSSL, RequestTimeout: 2 * time.Second,
		TLS: auth.TLSOptions{CertFile: s.cert, KeyFile: s.key}})
	cfg := clientTLS(t, s.ca, nil)
	createTopicTLS(t, srv, cfg, "garbage")

	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr().String()), kgo.DialTLSConfig(cfg), kgo.DefaultProduceTopic("garbage"))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v0")}).FirstErr())

	// A silent client holds a connection in its handshake...
	silent, err := net.Dial("tcp", srv.Addr().String())
	require.NoError(t, err)
	defer silent.Close()
	// ...while garbage (a TLS record header, then junk; and plain junk)
	// closes its own connection at once.
	for _, junk := range [][]byte{
		{0x16, 0x03, 0x01, 0x00, 0x05, 0xde, 0xad, 0xbe, 0xef, 0x00},
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		make([]byte, 300),
	} {
		g, err := net.Dial("tcp", srv.Addr().String())
		require.NoError(t, err)
		_, err = g.Write(junk)
		require.NoError(t, err)
		requireClosed(t, g)
		g.Close()
	}
	// New clients connect and work meanwhile.
	createTopicTLS(t, srv, cfg, "garbage2")
	require.NoError(t, produceConsume(t, srv, cfg, "garbage2", 3))
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr())
	// The silent one is closed after RequestTimeout.
	requireClosed(t, silent)
	eventually(t, "the TLS metrics and producer to catch up", 15*time.Second, func() bool { return srv.k.TLSHandshakeFailures("timeout") >= 1 })
	require.GreaterOrEqual(t, srv.k.TLSHandshakeFailures("not_tls")+srv.k.TLSHandshakeFailures("handshake"), 3.0)
}

// requireClosed waits (bounded) for the server to close c.
func requireClosed(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // an alert, say
		}
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server did not close the connection")
		require.True(t, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err), "%v", err)
		return
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// TestSASLSSLCertificatePrincipal: on SASL_SSL the SASL exchange says who
// a client is, so a verified client certificate does not make the
// connection's principal; it is kept for SASL EXTERNAL (certPrincipal).
func TestSASLSSLCertificatePrincipal(t *testing.T) {
	s := newTLSSetup(t)
	srv := startTLSServer(t, s, kafka.ProtocolSASLSSL, auth.TLSOptions{ClientCAFile: s.caPEM})
	alice := s.ca.Client(t, pkix.Name{CommonName: "alice"})
	d := &tls.Dialer{Config: clientTLS(t, s.ca, alice)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", srv.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	var principals, certPrincipals []string
	eventually(t, "the server to finish the handshake", 15*time.Second, func() bool {
		principals, certPrincipals = srv.k.ConnPrincipals()
		return len(principals) == 1
	})
	require.Equal(t, kafka.AnonymousPrincipal, principals[0], "not authenticated until SASL")
	require.Equal(t, "User:alice", certPrincipals[0])
}
