package kafka_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/internal/testcerts"
	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/node"
)

// saslCreds is the static credentials source of these tests: alice with
// both SCRAM mechanisms.
func saslCreds(t *testing.T) auth.StaticCredentials {
	t.Helper()
	var out auth.StaticCredentials
	for _, mech := range []string{metadata.ScramSHA256, metadata.ScramSHA512} {
		c, err := metadata.ScramCredentialFromPassword("alice", mech, "alice-secret", []byte("salt-"+mech), 4096)
		require.NoError(t, err)
		out = append(out, c)
	}
	return out
}

func saslServer(t *testing.T, protocol kafka.SecurityProtocol, mechs []string, mod func(*node.Config)) *server {
	t.Helper()
	cfg := node.Config{SecurityProtocol: protocol, SASL: kafka.SASLOptions{
		Mechanisms: mechs, Credentials: saslCreds(t), FakeSaltKey: []byte("test"),
	}}
	if mod != nil {
		mod(&cfg)
	}
	return startServer(t, cfg)
}

// ping connects a franz-go client with m and asks for metadata: the
// first request after authentication.
func ping(t *testing.T, s *server, m sasl.Mechanism, opts ...kgo.Opt) error {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(s.Addr().String()), kgo.SASL(m), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

func TestSASLScram(t *testing.T) {
	s := saslServer(t, kafka.ProtocolSASLPlaintext, nil, nil) // default: SCRAM-SHA-256 and -512
	for name, mech := range map[string]func(scram.Auth) sasl.Mechanism{
		"256": func(a scram.Auth) sasl.Mechanism { return a.AsSha256Mechanism() },
		"512": func(a scram.Auth) sasl.Mechanism { return a.AsSha512Mechanism() },
	} {
		t.Run(name, func(t *testing.T) {
			// Authenticated: produce and read back.
			topic := "scram-" + name
			cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.SASL(mech(scram.Auth{User: "alice", Pass: "alice-secret"})),
				kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics(topic))
			require.NoError(t, err)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			createTopicSASL(t, cl, topic)
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr())
			fs := cl.PollFetches(ctx)
			require.NoError(t, fs.Err())
			require.Equal(t, "hello", string(fs.Records()[0].Value))

			wrong := ping(t, s, mech(scram.Auth{User: "alice", Pass: "wrong"}))
			require.ErrorIs(t, wrong, kerr.SaslAuthenticationFailed)
			unknown := ping(t, s, mech(scram.Auth{User: "nobody", Pass: "x"}))
			require.ErrorIs(t, unknown, kerr.SaslAuthenticationFailed)
			// The same words for both: the answer does not say who exists.
			require.Equal(t, strings.ReplaceAll(wrong.Error(), "alice", "X"), strings.ReplaceAll(unknown.Error(), "nobody", "X"))
			require.Contains(t, wrong.Error(), "invalid credentials")
		})
	}
	failures, _, _, successes := s.k.AuthCounts()
	require.Equal(t, 4.0, failures)
	require.GreaterOrEqual(t, successes, 2.0)
}

// TestSASLMechanismFallback: a client that asks first for a mechanism the
// listener does not offer gets UNSUPPORTED_SASL_MECHANISM with the list,
// and may try another on the same connection (franz-go does, offering
// SCRAM-SHA-x-PLUS before SCRAM-SHA-x); after three refusals the
// connection is closed.
func TestSASLMechanismFallback(t *testing.T) {
	s := saslServer(t, kafka.ProtocolSASLPlaintext, []string{"SCRAM-SHA-256"}, nil)
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}
	require.NoError(t, ping(t, s, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), alice.AsSha256Mechanism())))

	c := saslConn{dialRaw(t, s)}
	for range 2 {
		resp := c.handshake(1, "SCRAM-SHA-512")
		require.Equal(t, kerr.UnsupportedSaslMechanism.Code, resp.ErrorCode)
		require.Equal(t, []string{"SCRAM-SHA-256"}, resp.SupportedMechanisms)
	}
	require.Equal(t, kerr.UnsupportedSaslMechanism.Code, c.handshake(1, "PLAIN").ErrorCode)
	c.closedWithoutAnswer(t)
}

func createTopicSASL(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
}

func TestSASLPlain(t *testing.T) {
	s := saslServer(t, kafka.ProtocolSASLPlaintext, []string{auth.MechPlain, auth.MechScramSHA256},
		func(c *node.Config) { c.SASL.AllowPlainWithoutTLS = true })
	require.NoError(t, ping(t, s, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	require.ErrorIs(t, ping(t, s, plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()), kerr.SaslAuthenticationFailed)
	require.ErrorIs(t, ping(t, s, plain.Auth{User: "ghost", Pass: "nope"}.AsMechanism()), kerr.SaslAuthenticationFailed)
	// SCRAM-SHA-512 is not enabled here.
	err := ping(t, s, scram.Sha512(func(context.Context) (scram.Auth, error) { return scram.Auth{User: "alice", Pass: "alice-secret"}, nil }))
	require.ErrorIs(t, err, kerr.UnsupportedSaslMechanism)

	// PLAIN on SASL_PLAINTEXT without --allow-plain-without-tls is refused at start.
	cfg := node.Config{SecurityProtocol: kafka.ProtocolSASLPlaintext, SASL: kafka.SASLOptions{Mechanisms: []string{auth.MechPlain}}}
	require.ErrorContains(t, cfg.Validate(), "allow-plain-without-tls")
}

// saslConn is a raw connection that speaks the SASL requests itself.
type saslConn struct{ *rawConn }

func (c saslConn) handshake(version int16, mech string) *kmsg.SASLHandshakeResponse {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mech
	c.send(req)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = version
	c.recv(resp)
	return resp
}

func (c saslConn) authenticate(msg []byte) *kmsg.SASLAuthenticateResponse {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 2, msg
	c.send(req)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 2
	c.recv(resp)
	return resp
}

// scramExchange runs client over c; it returns the failing response, or nil.
func (c saslConn) scramExchange(t *testing.T, client *auth.ScramClient) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := c.handshake(1, client.Mechanism)
	require.Zero(t, hs.ErrorCode, "handshake: %v", kerr.ErrorForCode(hs.ErrorCode))
	msg, _, err := client.Step(nil)
	require.NoError(t, err)
	for {
		resp := c.authenticate(msg)
		if resp.ErrorCode != 0 {
			return resp
		}
		out, done, err := client.Step(resp.SASLAuthBytes)
		require.NoError(t, err)
		if done {
			return nil
		}
		msg = out
	}
}

// metadataWorks sends a Metadata request and reads its answer.
func (c saslConn) metadataWorks(t *testing.T) {
	t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.send(md)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	c.recv(resp)
	require.Len(t, resp.Brokers, 1)
}

// closedWithoutAnswer checks the server closed the connection and sent
// nothing more.
func (c saslConn) closedWithoutAnswer(t *testing.T) {
	t.Helper()
	var b [1]byte
	_, err := c.c.Read(b[:])
	require.ErrorIs(t, err, io.EOF)
}

func TestSASLRequestsBeforeAuthentication(t *testing.T) {
	s := saslServer(t, kafka.ProtocolSASLPlaintext, nil, nil)

	// Metadata before authenticating: closed, unanswered.
	c := saslConn{dialRaw(t, s)}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.send(md)
	c.closedWithoutAnswer(t)

	// ApiVersions first is fine (it lists the SASL APIs), a second is not.
	c = saslConn{dialRaw(t, s)}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	c.send(av)
	avr := kmsg.NewPtrApiVersionsResponse()
	avr.Version = 3
	c.recv(avr)
	require.Zero(t, avr.ErrorCode)
	keys := map[int16]bool{}
	for _, k := range avr.ApiKeys {
		keys[k.ApiKey] = true
	}
	require.True(t, keys[kmsg.SASLHandshake.Int16()] && keys[kmsg.SASLAuthenticate.Int16()])
	c.send(av)
	c.closedWithoutAnswer(t)

	// SaslAuthenticate before SaslHandshake.
	c = saslConn{dialRaw(t, s)}
	c.send(kmsg.NewPtrSASLAuthenticateRequest())
	c.closedWithoutAnswer(t)

	// An oversized frame before authentication (a would-be produce).
	c = saslConn{dialRaw(t, s)}
	_, err := c.c.Write(binary.BigEndian.AppendUint32(nil, 1<<20))
	require.NoError(t, err)
	c.closedWithoutAnswer(t)

	// An unsupported mechanism: told which are enabled; anything but
	// another SaslHandshake then closes the connection.
	c = saslConn{dialRaw(t, s)}
	hs := c.handshake(1, "GSSAPI")
	require.Equal(t, kerr.UnsupportedSaslMechanism.Code, hs.ErrorCode)
	require.Equal(t, []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, hs.SupportedMechanisms)
	c.send(md)
	c.closedWithoutAnswer(t)

	// After authentication, a second handshake is ILLEGAL_SASL_STATE.
	c = saslConn{dialRaw(t, s)}
	require.Nil(t, c.scramExchange(t, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA512}))
	c.metadataWorks(t)
	require.Equal(t, kerr.IllegalSaslState.Code, c.handshake(1, "SCRAM-SHA-256").ErrorCode)
	c.metadataWorks(t)
}

// On a listener without SASL the SASL APIs are advertised (as Kafka does)
// and answer ILLEGAL_SASL_STATE.
func TestSASLOnPlaintextListener(t *testing.T) {
	s := startServer(t, node.Config{})
	c := saslConn{dialRaw(t, s)}
	require.Equal(t, kerr.IllegalSaslState.Code, c.handshake(1, "PLAIN").ErrorCode)
	resp := c.authenticate([]byte("\x00a\x00b"))
	require.Equal(t, kerr.IllegalSaslState.Code, resp.ErrorCode)
	require.Contains(t, *resp.ErrorMessage, "without SASL")
	c.metadataWorks(t)
}

// SaslHandshake v0: the mechanism's messages follow as bare frames.
func TestSASLHandshakeV0(t *testing.T) {
	s := saslServer(t, kafka.ProtocolSASLPlaintext, []string{auth.MechPlain, auth.MechScramSHA256},
		func(c *node.Config) { c.SASL.AllowPlainWithoutTLS = true })
	bare := func(c saslConn, msg []byte) []byte {
		_, err := c.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...))
		require.NoError(t, err)
		var size [4]byte
		_, err = io.ReadFull(c.c, size[:])
		require.NoError(t, err)
		buf := make([]byte, binary.BigEndian.Uint32(size[:]))
		_, err = io.ReadFull(c.c, buf)
		require.NoError(t, err)
		return buf
	}
	c := saslConn{dialRaw(t, s)}
	require.Zero(t, c.handshake(0, "PLAIN").ErrorCode)
	require.Empty(t, bare(c, []byte("\x00alice\x00alice-secret")))
	c.metadataWorks(t)

	// SCRAM over bare frames.
	c = saslConn{dialRaw(t, s)}
	require.Zero(t, c.handshake(0, "SCRAM-SHA-256").ErrorCode)
	cl := &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA256}
	msg, _, _ := cl.Step(nil)
	msg, _, err := cl.Step(bare(c, msg))
	require.NoError(t, err)
	_, done, err := cl.Step(bare(c, msg))
	require.NoError(t, err)
	require.True(t, done)
	c.metadataWorks(t)

	// A wrong password: closed without an answer (v0 cannot say why).
	c = saslConn{dialRaw(t, s)}
	require.Zero(t, c.handshake(0, "PLAIN").ErrorCode)
	wrong := "\x00alice\x00wrong!"
	_, err = c.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(wrong))), wrong...))
	require.NoError(t, err)
	c.closedWithoutAnswer(t)
}

func TestSASLLockout(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	s := saslServer(t, kafka.ProtocolSASLPlaintext, nil, func(c *node.Config) {
		c.Clock = clk
		c.SASL.Lockout = auth.LockoutOptions{Failures: 3, Window: time.Minute, Duration: 5 * time.Minute}
	})
	from := func(ip string) kgo.Opt {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		return kgo.Dialer(d.DialContext)
	}
	good := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()
	bad := scram.Auth{User: "alice", Pass: "guess"}.AsSha256Mechanism()

	for i := 0; i < 3; i++ {
		require.ErrorIs(t, ping(t, s, bad, from("127.0.0.2")), kerr.SaslAuthenticationFailed)
	}
	failures, lockouts, _, _ := s.k.AuthCounts()
	require.Equal(t, 3.0, failures)
	require.Equal(t, 1.0, lockouts)

	// Locked: even the right password is refused, with a clear message.
	err := ping(t, s, good, from("127.0.0.2"))
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	require.Contains(t, err.Error(), "too many failed authentications from 127.0.0.2; locked out until 2026-12-05T12:05:00Z")
	// Other IPs are not.
	require.NoError(t, ping(t, s, good, from("127.0.0.1")))
	_, _, refusals, _ := s.k.AuthCounts()
	require.Equal(t, 1.0, refusals)

	// Not over one second early; over on time.
	clk.Advance(5*time.Minute - time.Second)
	require.ErrorContains(t, ping(t, s, good, from("127.0.0.2")), "locked out")
	clk.Advance(time.Second)
	require.NoError(t, ping(t, s, good, from("127.0.0.2")))
	failures, lockouts, _, _ = s.k.AuthCounts()
	require.Equal(t, 3.0, failures, "refusals of a locked IP are not failures")
	require.Equal(t, 1.0, lockouts)
}

// tlsSASLServer runs a SASL_SSL listener with the setup's certificate,
// asking clients for a certificate (verified when given).
func tlsSASLServer(t *testing.T, ts *tlsSetup, mechs []string) *server {
	t.Helper()
	return saslServer(t, kafka.ProtocolSASLSSL, mechs, func(c *node.Config) {
		c.TLS = auth.TLSOptions{CertFile: ts.cert, KeyFile: ts.key, ClientCAFile: ts.caPEM, ClientAuth: auth.ClientAuthRequested}
	})
}

func dialTLS(t *testing.T, s *server, ts *tlsSetup, version uint16, client *testcerts.Pair) (saslConn, tls.ConnectionState) {
	t.Helper()
	cfg := clientTLS(t, ts.ca, client)
	cfg.MaxVersion = version
	tc, err := tls.Dial("tcp", s.Addr().String(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { tc.Close() })
	require.NoError(t, tc.SetDeadline(time.Now().Add(20*time.Second)))
	return saslConn{&rawConn{t: t, c: tc}}, tc.ConnectionState()
}

func TestSASLScramPlus(t *testing.T) {
	ts := newTLSSetup(t)
	s := tlsSASLServer(t, ts, []string{auth.MechScramSHA256Plus, auth.MechScramSHA256})
	user := func(cbName string, cbData []byte) *auth.ScramClient {
		return &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA256Plus, CBName: cbName, CBData: cbData}
	}

	// tls-server-end-point over TLS 1.2 and 1.3: bound to the certificate
	// the client saw.
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c, st := dialTLS(t, s, ts, v, nil)
		data, err := auth.BindingData(auth.BindingServerEndPoint, &st, st.PeerCertificates[0])
		require.NoError(t, err)
		require.Nil(t, c.scramExchange(t, user(auth.BindingServerEndPoint, data)))
		c.metadataWorks(t)
	}
	// tls-exporter over TLS 1.3.
	c, st := dialTLS(t, s, ts, tls.VersionTLS13, nil)
	data, err := auth.BindingData(auth.BindingExporter, &st, nil)
	require.NoError(t, err)
	require.Nil(t, c.scramExchange(t, user(auth.BindingExporter, data)))
	c.metadataWorks(t)

	// A client bound to another certificate (what a TLS-terminating proxy
	// would present) is refused and disconnected.
	other := ts.ca.Server(t, "proxy")
	c, _ = dialTLS(t, s, ts, tls.VersionTLS13, nil)
	wrong, err := auth.ServerEndPoint(other.Cert)
	require.NoError(t, err)
	resp := c.scramExchange(t, user(auth.BindingServerEndPoint, wrong))
	require.NotNil(t, resp)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	require.Contains(t, *resp.ErrorMessage, "channel binding does not match")
	c.closedWithoutAnswer(t)

	// The exporter of another connection does not match either.
	_, st2 := dialTLS(t, s, ts, tls.VersionTLS13, nil)
	data2, err := auth.BindingData(auth.BindingExporter, &st2, nil)
	require.NoError(t, err)
	c, _ = dialTLS(t, s, ts, tls.VersionTLS13, nil)
	require.NotNil(t, c.scramExchange(t, user(auth.BindingExporter, data2)))

	// A non-PLUS client that could bind ("y") while the server offers
	// -PLUS: a downgrade, refused.
	c, _ = dialTLS(t, s, ts, tls.VersionTLS13, nil)
	resp = c.scramExchange(t, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA256, CBFlag: "y"})
	require.NotNil(t, resp)
	require.Contains(t, *resp.ErrorMessage, "downgrade")

	// franz-go (no channel binding, "n") authenticates with SCRAM-SHA-256 over TLS.
	require.NoError(t, ping(t, s, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(),
		kgo.DialTLSConfig(clientTLS(t, ts.ca, nil))))
}

// Garbage during authentication closes that connection only: an
// authenticated client on another connection keeps working throughout.
func TestSASLGarbage(t *testing.T) {
	s := saslServer(t, kafka.ProtocolSASLPlaintext, nil, nil)
	ok := saslConn{dialRaw(t, s)}
	require.Nil(t, ok.scramExchange(t, &auth.ScramClient{User: "alice", Password: "alice-secret", Mechanism: auth.MechScramSHA256}))

	garbage := [][]byte{
		[]byte("\x00\x00\x00\x10GET / HTTP/1.1\r\n"), // a frame that is no request
		{0xff, 0xff, 0xff, 0xff},                     // a negative size
		{0x16, 0x03, 0x01, 0x00, 0x10},               // a TLS hello on a plaintext port
	}
	var wg sync.WaitGroup
	for _, g := range garbage {
		c := saslConn{dialRaw(t, s)}
		_, err := c.c.Write(g)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [1]byte
			_, err := c.c.Read(b[:])
			if !errors.Is(err, io.EOF) {
				t.Errorf("garbage %q: want the connection closed, got %v", g, err)
			}
		}()
		ok.metadataWorks(t)
	}
	wg.Wait()

	// Garbage inside SASL messages: answered SASL_AUTHENTICATION_FAILED, closed.
	for _, msg := range [][]byte{[]byte("\xff\xfe"), []byte("n,,n=alice"), make([]byte, auth.MaxMessageSize+1)} {
		c := saslConn{dialRaw(t, s)}
		require.Zero(t, c.handshake(1, "SCRAM-SHA-256").ErrorCode)
		resp := c.authenticate(msg)
		require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
		require.Contains(t, *resp.ErrorMessage, "malformed")
		c.closedWithoutAnswer(t)
		ok.metadataWorks(t)
	}
}

// EXTERNAL on SASL_SSL: offered only to a client with a verified
// certificate, whose subject names the user.
func TestSASLExternal(t *testing.T) {
	ts := newTLSSetup(t)
	s := tlsSASLServer(t, ts, []string{auth.MechExternal, auth.MechScramSHA256})
	client := ts.ca.Client(t, pkix.Name{CommonName: "svc-orders"})

	c, _ := dialTLS(t, s, ts, tls.VersionTLS13, client)
	require.Zero(t, c.handshake(1, auth.MechExternal).ErrorCode)
	resp := c.authenticate([]byte("svc-orders"))
	require.Zero(t, resp.ErrorCode)
	c.metadataWorks(t)

	// Asking to act as someone else is refused.
	c, _ = dialTLS(t, s, ts, tls.VersionTLS13, client)
	require.Zero(t, c.handshake(1, auth.MechExternal).ErrorCode)
	resp = c.authenticate([]byte("admin"))
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	c.closedWithoutAnswer(t)

	// Without a client certificate EXTERNAL is not offered.
	c, _ = dialTLS(t, s, ts, tls.VersionTLS13, nil)
	hs := c.handshake(1, auth.MechExternal)
	require.Equal(t, kerr.UnsupportedSaslMechanism.Code, hs.ErrorCode)
	require.Equal(t, []string{auth.MechScramSHA256}, hs.SupportedMechanisms)
}
