package client

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/testcerts"
)

// plusBroker is a kfake TLS cluster whose SaslHandshake and
// SaslAuthenticate are answered by scramTestServer: it offers
// SCRAM-SHA-256-PLUS and SCRAM-SHA-256, verifies the channel binding
// against expectCB, and answers a mismatch as Kafka answers a failed
// authentication (SASL_AUTHENTICATION_FAILED).
type plusBroker struct {
	addr string

	mu         sync.Mutex
	handshakes []string // mechanisms the client asked for, in order
	srv        *scramTestServer
	stage      int
}

func newPlusBroker(t *testing.T, pki *testcerts.PKI, pass string, expectCB []byte) *plusBroker {
	t.Helper()
	requireKfake(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(pki.ServerTLS(false)))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	b := &plusBroker{addr: c.ListenAddrs()[0]}
	c.ControlKey(int16(kmsg.SASLHandshake), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.SASLHandshakeRequest)
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{MechScramSHA256Plus, MechScramSHA256}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.handshakes = append(b.handshakes, req.Mechanism)
		if req.Mechanism != MechScramSHA256Plus {
			// The test server speaks only -PLUS: a client that
			// does not bind is refused.
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		b.srv, b.stage = newScramTestServer(pass, expectCB), 0
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.SASLAuthenticateRequest)
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.stage++
		switch b.stage {
		case 1:
			first, err := b.srv.handleFirst(req.SASLAuthBytes)
			if err != nil {
				resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
				msg := err.Error()
				resp.ErrorMessage = &msg
				return resp, nil, true
			}
			resp.SASLAuthBytes = first
		default:
			final := b.srv.handleFinal(req.SASLAuthBytes)
			if bytes.HasPrefix(final, []byte("e=")) {
				resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
				msg := "Authentication failed: " + string(final[2:])
				resp.ErrorMessage = &msg
				return resp, nil, true
			}
			resp.SASLAuthBytes = final
		}
		return resp, nil, true
	})
	return b
}

// TestScramPlusOverTheWire: against a broker that offers
// SCRAM-SHA-256-PLUS, the toolkit's default SCRAM over TLS picks it, binds
// to the certificate the TLS handshake presented (recorded by the dialer
// under the broker's address), and logs in; a broker that expects another
// certificate (a man in the middle's view) refuses it.
func TestScramPlusOverTheWire(t *testing.T) {
	pki := testcerts.NewPKI(t, "alice")
	require.NotNil(t, pki.Server.Leaf)
	rightCB, err := TLSServerEndPoint(pki.Server.Leaf)
	require.NoError(t, err)
	otherCB, err := TLSServerEndPoint(loadCert(t, "testdata/cb-rsa-sha256.pem"))
	require.NoError(t, err)
	sec := Security{TLSCAFile: pki.CAFile, User: "alice", Password: "alice-pw"} // SCRAM-SHA-256 by default

	b := newPlusBroker(t, pki, "alice-pw", rightCB)
	cl, err := Dial(testCtx(t), Options{Addr: b.addr, DialTimeout: 3 * time.Second, RequestTimeout: 5 * time.Second, Security: sec})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	require.NoError(t, cl.CreateTopic(testCtx(t), "bound", 1, 1, nil))
	b.mu.Lock()
	require.NotEmpty(t, b.handshakes)
	for _, m := range b.handshakes {
		require.Equal(t, MechScramSHA256Plus, m, "every connection binds")
	}
	b.mu.Unlock()

	wrong := newPlusBroker(t, pki, "alice-pw", otherCB)
	_, err = Dial(testCtx(t), Options{Addr: wrong.addr, DialTimeout: 3 * time.Second, RequestTimeout: 3 * time.Second, Security: sec})
	require.Error(t, err)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	require.ErrorIs(t, err, ErrNotAuthorized)
	require.True(t, strings.Contains(err.Error(), "channel-bindings-dont-match"), err.Error())
}
