package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moonmq/moonmq/net/auth"
)

// SecurityProtocol is a listener's security.protocol, Kafka's names.
type SecurityProtocol string

const (
	ProtocolPlaintext     SecurityProtocol = "PLAINTEXT"
	ProtocolSSL           SecurityProtocol = "SSL"
	ProtocolSASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	ProtocolSASLSSL       SecurityProtocol = "SASL_SSL"
)

// ParseSecurityProtocol reads a protocol name (any case; "" is PLAINTEXT).
func ParseSecurityProtocol(s string) (SecurityProtocol, error) {
	switch p := SecurityProtocol(strings.ToUpper(strings.TrimSpace(s))); p {
	case "":
		return ProtocolPlaintext, nil
	case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		return p, nil
	}
	return "", fmt.Errorf("%q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", s)
}

// TLS says whether connections are TLS.
func (p SecurityProtocol) TLS() bool { return p == ProtocolSSL || p == ProtocolSASLSSL }

// SASL says whether connections authenticate with SASL.
func (p SecurityProtocol) SASL() bool { return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL }

// AuthOptions say how the listener's connections are secured and who they
// act as.
type AuthOptions struct {
	// SecurityProtocol of the listener; "" is PLAINTEXT.
	SecurityProtocol SecurityProtocol
	// TLS is the listener's TLS material, required with SSL and SASL_SSL.
	// It may be reloaded while the server runs (auth.TLS.Reload): new
	// handshakes use the new material, open connections keep theirs.
	TLS *auth.TLS
	// SASL configures authentication on SASL_PLAINTEXT and SASL_SSL
	// (sasl.go, auth_options.go).
	SASL SASLOptions
}

func (a AuthOptions) validate() error {
	p, err := ParseSecurityProtocol(string(a.SecurityProtocol))
	if err != nil {
		return fmt.Errorf("security-protocol %w", err)
	}
	if p.TLS() && a.TLS == nil {
		return fmt.Errorf("security-protocol %s needs TLS material (tls-cert and tls-key)", p)
	}
	return a.ValidateSASL()
}

// wrapTLS makes a new connection's TLS side on a TLS listener (no I/O:
// the handshake runs in the connection's goroutine, handshakeTLS), or
// returns nc as it is.
func (c *conn) wrapTLS(nc net.Conn) net.Conn {
	if !c.s.opts.Auth.SecurityProtocol.TLS() {
		return nc
	}
	return tls.Server(nc, c.s.opts.Auth.TLS.ServerConfig(func(leaf *x509.Certificate) { c.tlsServerCert = leaf }))
}

// handshakeTLS runs a TLS connection's handshake, bounded by
// RequestTimeout, and sets what it establishes: tlsState, certPrincipal,
// and on an SSL listener the connection's principal. Its error closes the
// connection (logged and counted by the caller).
func (c *conn) handshakeTLS(tc *tls.Conn) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.opts.RequestTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	cs := tc.ConnectionState()
	c.tlsState = &cs
	p, ok, err := c.s.opts.Auth.TLS.Principal(cs)
	if err != nil {
		return &principalError{err}
	}
	if ok {
		c.certPrincipal = p
		if c.s.opts.Auth.SecurityProtocol == ProtocolSSL {
			// On SASL_SSL the SASL exchange says who the client is
			// (EXTERNAL takes certPrincipal).
			c.principal = p
		}
	}
	c.tlsDone.Store(true)
	return nil
}

// principalError is a verified certificate no principal mapping rule maps.
type principalError struct{ err error }

func (e *principalError) Error() string { return e.err.Error() }
func (e *principalError) Unwrap() error { return e.err }

// Reasons of moonmq_tls_handshake_failures_total.
const (
	tlsFailTimeout       = "timeout"
	tlsFailClosed        = "closed_by_client"
	tlsFailNotTLS        = "not_tls"
	tlsFailNoCert        = "no_client_certificate"
	tlsFailBadCert       = "bad_client_certificate"
	tlsFailPrincipal     = "principal_mapping"
	tlsFailHandshake     = "handshake"
	tlsFailShuttingDown  = "shutting_down"
	tlsFailureReasonHelp = "timeout, closed_by_client, not_tls, no_client_certificate, bad_client_certificate, principal_mapping, handshake, shutting_down"
)

// tlsFailureReason labels a failed handshake.
func (c *conn) tlsFailureReason(err error) string {
	var (
		rh  tls.RecordHeaderError
		cve *tls.CertificateVerificationError
		pe  *principalError
	)
	switch {
	case c.draining() || c.s.ctx.Err() != nil:
		return tlsFailShuttingDown
	case errors.As(err, &pe):
		return tlsFailPrincipal
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return tlsFailTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return tlsFailClosed
	case errors.As(err, &rh):
		return tlsFailNotTLS
	case errors.As(err, &cve):
		return tlsFailBadCert
	case strings.Contains(err.Error(), "didn't provide a certificate"):
		return tlsFailNoCert
	}
	return tlsFailHandshake
}

// logTLSFailure says why a handshake failed: clients that go away or a
// shutdown at debug, the rest (wrong certificates, garbage, a plaintext
// client on a TLS port) at info, with what to do about it.
func (c *conn) logTLSFailure(reason string, err error) {
	attrs := []any{"peer", c.peer, "reason", reason, "err", err}
	switch reason {
	case tlsFailClosed, tlsFailShuttingDown:
		c.s.log.Debug("TLS handshake did not finish", attrs...)
		return
	case tlsFailNotTLS:
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) && rh.RecordHeader[0] == 0 {
			// A Kafka request's size starts with 0 for any frame under
			// 16 MiB: a plaintext client on this TLS port.
			attrs = append(attrs, "hint", "the client speaks plaintext Kafka: set its security.protocol to SSL or SASL_SSL")
		}
	case tlsFailNoCert, tlsFailBadCert:
		attrs = append(attrs, "client_auth", c.s.opts.Auth.TLS.ClientAuth().String())
	}
	c.s.log.Info("TLS handshake failed; closing the connection", attrs...)
}

// tlsMetrics count TLS handshakes on the Kafka listener.
type tlsMetrics struct {
	handshakes prometheus.Counter
	failures   *prometheus.CounterVec // reason
}

func newTLSMetrics() *tlsMetrics {
	m := &tlsMetrics{
		handshakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "moonmq_tls_handshakes_total", Help: "TLS handshakes completed on the Kafka listener.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "moonmq_tls_handshake_failures_total",
			Help: "TLS handshakes on the Kafka listener that failed, closing their connection, by reason (" + tlsFailureReasonHelp + ").",
		}, []string{"reason"}),
	}
	for _, r := range []string{tlsFailTimeout, tlsFailClosed, tlsFailNotTLS, tlsFailNoCert, tlsFailBadCert,
		tlsFailPrincipal, tlsFailHandshake, tlsFailShuttingDown} {
		m.failures.WithLabelValues(r)
	}
	return m
}

func (m *tlsMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.handshakes, m.failures}
}
