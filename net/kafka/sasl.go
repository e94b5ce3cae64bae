package kafka

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/net/auth"
)

// SASL authentication on the Kafka wire (KIP-43, KIP-152), after Kafka's
// SaslServerAuthenticator: on a SASL_* listener a connection may send
// ApiVersions (once, before the handshake), then SaslHandshake naming a
// mechanism, then SaslAuthenticate until the mechanism is done; any other
// request before that closes the connection, unanswered. A failed
// exchange is answered SASL_AUTHENTICATION_FAILED with a message and the
// connection is closed once the answer is written. A SaslHandshake v0 is
// followed by the mechanism's messages as bare size-prefixed frames
// rather than SaslAuthenticate requests (the pre-KIP-152 protocol).
//
// Sessions never expire (session_lifetime_ms 0: no re-authentication,
// KIP-368). After success, or on a listener without SASL, SaslHandshake
// and SaslAuthenticate are answered ILLEGAL_SASL_STATE, as Kafka's
// request handler does.

// maxUnauthenticatedRequest bounds a request frame before authentication
// (Kafka's sasl authenticate max receive size, 512 KiB): an anonymous
// peer cannot make the broker buffer a 100 MiB produce.
const maxUnauthenticatedRequest = 512 << 10

// saslState is a connection's progress through authentication. Read loop
// only.
type saslState struct {
	versionsDone bool         // ApiVersions answered: the next request must be SaslHandshake
	handshaken   bool         // SaslHandshake accepted: sess runs
	raw          bool         // handshake v0: the mechanism's messages come as bare frames
	sess         auth.Session // the exchange, once handshaken
	// refusedMechanisms counts handshakes refused for their mechanism:
	// the client may try another, up to maxRefusedMechanisms.
	refusedMechanisms int
}

// maxRefusedMechanisms is how many refused SaslHandshakes a connection
// gets before it is closed (a client trying mechanisms in turn needs two).
const maxRefusedMechanisms = 3

// authenticating reports whether the connection must still authenticate.
func (c *conn) authenticating() bool { return c.sasl != nil }

// saslGate lets through what may come before authentication and refuses
// anything else; its error closes the connection without an answer.
func (c *conn) saslGate(r *request) error {
	st := c.sasl
	switch r.key {
	case kmsg.ApiVersions.Int16():
		if st.versionsDone || st.handshaken {
			return errors.New("unexpected ApiVersions request during SASL authentication")
		}
		if r.kreq != nil && c.s.offers(r.key, r.version) {
			// One answered ApiVersions; one answered UNSUPPORTED_VERSION
			// may be retried at our version.
			st.versionsDone = true
		}
		return nil
	case kmsg.SASLHandshake.Int16():
		if st.handshaken {
			return errors.New("unexpected second SaslHandshake request during SASL authentication")
		}
	case kmsg.SASLAuthenticate.Int16():
		if !st.handshaken || st.raw {
			return errors.New("SaslAuthenticate request before a SaslHandshake")
		}
	default:
		return fmt.Errorf("unexpected %s request before SASL authentication (the client must authenticate first: is it configured for %s?)",
			apiName(r.key), c.s.opts.Auth.SecurityProtocol)
	}
	if r.kreq == nil || !c.s.offers(r.key, r.version) {
		return fmt.Errorf("%s v%d is not supported", kmsg.NameForKey(r.key), r.version)
	}
	return nil
}

// connInfo is what a SASL exchange needs of the connection's TLS, as its
// handshake established it (security.go).
func (c *conn) connInfo() auth.ConnInfo {
	return auth.ConnInfo{TLS: c.tlsState, ServerCert: c.tlsServerCert, CertPrincipal: c.certPrincipal,
		AllowPlainWithoutTLS: c.s.opts.Auth.SASL.AllowPlainWithoutTLS}
}

func (c *conn) handleSaslHandshake(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if !c.authenticating() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	ci := c.connInfo()
	resp.SupportedMechanisms = c.s.sasl.Offered(ci)
	if !slices.Contains(resp.SupportedMechanisms, req.Mechanism) {
		// Kafka closes the connection here. MoonMQ lets the client try
		// another of the listed mechanisms on it (franz-go does: it
		// offers SCRAM-SHA-x-PLUS first and falls back), a few times.
		c.sasl.refusedMechanisms++
		c.s.log.Info("refusing SASL handshake: mechanism not enabled", "peer", c.peer, "mechanism", req.Mechanism, "enabled", resp.SupportedMechanisms)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.closeAfterReply = c.sasl.refusedMechanisms >= maxRefusedMechanisms || req.Version == 0
		return resp, nil
	}
	if req.Version == 0 {
		// No SaslAuthenticate will follow to carry a message: refuse a
		// locked-out IP here.
		if err := c.s.lockout.Check(c.host, c.s.opts.Clock.Now()); err != nil {
			c.lockedOut(err)
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			c.closeAfterReply = true
			return resp, nil
		}
	}
	sess, err := c.s.sasl.Start(req.Mechanism, ci)
	if err != nil { // Offered said it was usable: only a bug gets here
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.closeAfterReply = true
		return resp, nil
	}
	c.sasl.handshaken, c.sasl.raw, c.sasl.sess = true, req.Version == 0, sess
	return resp, nil
}

func (c *conn) handleSaslAuthenticate(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if !c.authenticating() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate request received after successful authentication"
		if !c.s.opts.Auth.SecurityProtocol.SASL() {
			msg = "SaslAuthenticate request received on a listener without SASL (" + string(c.s.opts.Auth.SecurityProtocol) + ")"
		}
		resp.ErrorMessage = &msg
		return resp, nil
	}
	reply, err := c.saslStep(req.SASLAuthBytes)
	if err != nil {
		msg := err.Error()
		if !errors.Is(err, auth.ErrLockedOut) {
			msg = auth.ClientMessage(c.sasl.sess.Mechanism(), err)
		}
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &msg
		c.closeAfterReply = true
		return resp, nil
	}
	resp.SASLAuthBytes = reply
	return resp, nil
}

// saslStep runs one message of the exchange: the lockout first (a locked
// IP's messages are not even looked at, so they cannot probe passwords),
// then the mechanism. It records the outcome (lockout, metrics, log) and,
// when the exchange succeeds, the connection's principal.
func (c *conn) saslStep(msg []byte) ([]byte, error) {
	now := c.s.opts.Clock.Now()
	if err := c.s.lockout.Check(c.host, now); err != nil {
		c.lockedOut(err)
		return nil, err
	}
	sess := c.sasl.sess
	reply, done, err := sess.Step(msg)
	if err != nil {
		c.s.metrics.authFailures.WithLabelValues(sess.Mechanism()).Inc()
		c.s.log.Info("SASL authentication failed", "peer", c.peer, "mechanism", sess.Mechanism(), "user", sess.User(), "reason", err)
		if until, locked := c.s.lockout.Failure(c.host, now); locked {
			c.s.metrics.authLockouts.Inc()
			c.s.log.Warn("locking out an IP after repeated failed authentications", "ip", c.host,
				"failures", c.s.opts.Auth.SASL.Lockout.Failures, "window", c.s.opts.Auth.SASL.Lockout.Window, "until", until.UTC())
		}
		return nil, err
	}
	if done {
		c.s.metrics.authSuccesses.WithLabelValues(sess.Mechanism()).Inc()
		c.principal = sess.Principal()
		c.sasl = nil
		c.s.log.Debug("SASL authenticated", "peer", c.peer, "mechanism", sess.Mechanism(), "principal", c.principal)
	}
	return reply, nil
}

// lockedOut logs and counts a refusal of a locked-out IP.
func (c *conn) lockedOut(err error) {
	c.s.metrics.authLockedRefusals.Inc()
	c.s.log.Warn("refusing SASL authentication", "peer", c.peer, "reason", err)
}

// saslRawToken reads one bare SASL frame (after a SaslHandshake v0) and
// queues the mechanism's answer as a bare frame. A failure closes the
// connection without an answer (the v0 protocol has no way to say why).
func (c *conn) saslRawToken(br *bufio.Reader) error {
	if err := c.nc.SetReadDeadline(time.Now().Add(c.s.opts.RequestTimeout)); err != nil {
		return err
	}
	var sizeBuf [4]byte
	if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
		return fmt.Errorf("reading a SASL token's size: %w", err)
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 0 || size > auth.MaxMessageSize {
		return fmt.Errorf("SASL token of %d bytes is outside [0, %d]", size, auth.MaxMessageSize)
	}
	msg := make([]byte, size)
	if _, err := io.ReadFull(br, msg); err != nil {
		return fmt.Errorf("reading a %d-byte SASL token: %w", size, err)
	}
	c.touch()
	out, err := c.saslStep(msg)
	if err != nil {
		return fmt.Errorf("SASL authentication (handshake v0): %w", err)
	}
	entry, err := c.out.reserve(c.ctx)
	if err != nil {
		return err
	}
	if out == nil {
		out = []byte{} // an empty token is still a frame
	}
	c.out.fill(entry, reply{req: &request{key: kmsg.SASLAuthenticate.Int16(), received: time.Now(), entry: entry}, raw: out, token: true})
	return nil
}
