package client

// Connection security: TLS (server verification, client certificates for
// mTLS) and SASL (PLAIN, SCRAM-SHA-256/512 and their -PLUS variants with
// tls-server-end-point channel binding), configured by Security.
//
// How the mechanism is negotiated: franz-go sends SaslHandshake with the
// FIRST mechanism of kgo.SASL(...); if the broker answers
// UNSUPPORTED_SASL_MECHANISM it retries, once, on the same connection, with
// the first of the client's remaining mechanisms that the answer lists
// (kgo/broker.go, brokerCxn.sasl). Kafka closes the connection after that
// answer, so the retry works on MoonMQ only. Over TLS with SCRAM and no
// mechanism named, Options.prepare therefore first asks a broker whether it
// offers SCRAM-SHA-256-PLUS (a SaslHandshake on a connection of its own,
// saslprobe.go): if so the toolkit lists SCRAM-SHA-256-PLUS first and plain
// SCRAM second, else plain SCRAM alone.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanism names, as Kafka and RFC 5802/5929 spell them.
const (
	MechPlain           = "PLAIN"
	MechScramSHA256     = ScramSHA256
	MechScramSHA512     = ScramSHA512
	MechScramSHA256Plus = "SCRAM-SHA-256-PLUS"
	MechScramSHA512Plus = "SCRAM-SHA-512-PLUS"
)

// AnonymousPrincipal is the principal of a connection that neither
// authenticates with SASL nor presents a client certificate (Kafka's).
const AnonymousPrincipal = "User:ANONYMOUS"

// Security configures how the toolkit authenticates and encrypts its
// connections. The zero value is PLAINTEXT without SASL.
type Security struct {
	// TLS turns on TLS. Setting any TLS file implies it.
	TLS bool
	// TLSCAFile is a PEM bundle of CAs that verify the brokers'
	// certificates. Empty: the system roots.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the client's PEM certificate and
	// key, for brokers that require client certificates (mTLS). Both or
	// neither.
	TLSCertFile, TLSKeyFile string
	// TLSServerName overrides the name the brokers' certificates are
	// checked against. Default: the host of each broker's address.
	TLSServerName string
	// TLSSkipHostnameVerify checks the certificate chain but not the
	// host name (librdkafka's ssl.endpoint.identification.algorithm=none).
	TLSSkipHostnameVerify bool
	// TLSInsecure accepts any certificate. Only ever set when a person
	// explicitly asks for it (enable.ssl.certificate.verification=false).
	TLSInsecure bool

	// Mechanism is the SASL mechanism: PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512, SCRAM-SHA-256-PLUS or SCRAM-SHA-512-PLUS. Empty with
	// a User means SCRAM-SHA-256, and over TLS SCRAM-SHA-256-PLUS when the
	// broker offers it (Options.prepare asks it first); a mechanism given
	// by name is used as it is.
	Mechanism string
	// User and Password are the SASL credentials. A Mechanism without a
	// User is an error.
	User, Password string

	// noPlus is set when a probe found the broker does not offer
	// SCRAM-SHA-x-PLUS (Options.prepare): SCRAM without channel binding.
	noPlus bool

	// labels name where each setting came from ("--tls-ca",
	// "ssl.ca.location in client.properties"), so errors point at what
	// to fix. Keys are the field names of Security.
	labels map[string]string
}

// label is how errors name a field: its flag or config key if known.
func (s Security) label(field string) string {
	if l := s.labels[field]; l != "" {
		return l
	}
	return map[string]string{
		"TLSCAFile": "TLS CA file", "TLSCertFile": "TLS certificate file", "TLSKeyFile": "TLS key file",
		"Mechanism": "SASL mechanism", "User": "SASL user", "Password": "SASL password",
	}[field]
}

// SetLabel records how errors should name a setting: field is a field
// name of Security ("TLSCAFile"), label what the person typed ("--tls-ca",
// "CA"). Labels are not part of the settings' equality in any test.
func (s *Security) SetLabel(field, label string) { s.setLabel(field, label) }

// setLabel records where field's value came from.
func (s *Security) setLabel(field, label string) {
	if s.labels == nil {
		s.labels = map[string]string{}
	}
	s.labels[field] = label
}

// UsesTLS reports whether connections use TLS.
func (s Security) UsesTLS() bool {
	return s.TLS || s.TLSCAFile != "" || s.TLSCertFile != "" || s.TLSKeyFile != "" ||
		s.TLSInsecure || s.TLSSkipHostnameVerify || s.TLSServerName != ""
}

// UsesSASL reports whether connections authenticate with SASL.
func (s Security) UsesSASL() bool { return s.User != "" || s.Mechanism != "" }

// Protocol is Kafka's name of the security protocol: PLAINTEXT, SSL,
// SASL_PLAINTEXT or SASL_SSL.
func (s Security) Protocol() string {
	switch {
	case s.UsesSASL() && s.UsesTLS():
		return "SASL_SSL"
	case s.UsesSASL():
		return "SASL_PLAINTEXT"
	case s.UsesTLS():
		return "SSL"
	}
	return "PLAINTEXT"
}

// mechanism normalises Mechanism (upper case; SCRAM-SHA-256 by default).
func (s Security) mechanism() string {
	m := strings.ToUpper(strings.TrimSpace(s.Mechanism))
	if m == "" {
		return MechScramSHA256
	}
	return m
}

// String describes the settings for logs and banners; it never includes
// the password.
func (s Security) String() string {
	var parts []string
	parts = append(parts, s.Protocol())
	if s.UsesSASL() {
		parts = append(parts, s.mechanism(), "user "+s.User)
	}
	if s.TLSCertFile != "" {
		parts = append(parts, "client certificate "+s.TLSCertFile)
	}
	if s.TLSInsecure {
		parts = append(parts, "certificate NOT verified")
	}
	return strings.Join(parts, ", ")
}

// Validate checks the settings without reading any file.
func (s Security) Validate() error {
	if s.UsesSASL() {
		switch s.mechanism() {
		case MechPlain, MechScramSHA256, MechScramSHA512:
		case MechScramSHA256Plus, MechScramSHA512Plus:
			if !s.UsesTLS() {
				return argError(fmt.Sprintf("%s: %s binds to the TLS channel: it needs TLS (--tls)", s.label("Mechanism"), s.mechanism()))
			}
		case "GSSAPI", "OAUTHBEARER", "AWS_MSK_IAM":
			return argError(fmt.Sprintf("%s: %s is not supported by the toolkit (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or their -PLUS forms)", s.label("Mechanism"), s.mechanism()))
		default:
			return argError(fmt.Sprintf("%s: unknown SASL mechanism %q (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, SCRAM-SHA-256-PLUS or SCRAM-SHA-512-PLUS)", s.label("Mechanism"), s.Mechanism))
		}
		if s.User == "" {
			return argError(fmt.Sprintf("%s: SASL mechanism %s needs a user", s.label("User"), s.mechanism()))
		}
		if s.Password == "" {
			at := s.labels["Password"]
			if at == "" {
				at = s.label("User")
			}
			return argError(fmt.Sprintf("%s: no password for user %q", at, s.User))
		}
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		if s.TLSCertFile == "" {
			return argError(fmt.Sprintf("%s: a client key needs its certificate (%s)", s.label("TLSKeyFile"), s.label("TLSCertFile")))
		}
		return argError(fmt.Sprintf("%s: a client certificate needs its key (%s)", s.label("TLSCertFile"), s.label("TLSKeyFile")))
	}
	return nil
}

// TLSConfig reads the CA and client certificate files and returns the
// client TLS configuration (TLS 1.2 minimum), or nil without TLS. Errors
// name the flag or config key of the file at fault.
func (s Security) TLSConfig() (*tls.Config, error) {
	if !s.UsesTLS() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.TLSServerName}
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.label("TLSCAFile"), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", s.label("TLSCAFile"), s.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	if s.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", s.label("TLSCertFile"), s.label("TLSKeyFile"), err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	switch {
	case s.TLSInsecure:
		cfg.InsecureSkipVerify = true
	case s.TLSSkipHostnameVerify:
		// Verify the chain against the roots, not the name: Go has no
		// switch for that, so verification moves to
		// VerifyConnection.
		cfg.InsecureSkipVerify = true
		roots := cfg.RootCAs
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// ClientCertPrincipal is the principal a broker derives by default from
// the client certificate: "User:" + its subject's common name, or "" when
// none is configured or readable.
func (s Security) ClientCertPrincipal() string {
	if s.TLSCertFile == "" || s.TLSKeyFile == "" {
		return ""
	}
	cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
	if err != nil || len(cert.Certificate) == 0 {
		return ""
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || leaf.Subject.CommonName == "" {
		return ""
	}
	return "User:" + leaf.Subject.CommonName
}

// Principal is whom the broker sees, by Kafka's default rules: the SASL
// user, else the client certificate's CN, else ANONYMOUS. (A broker may map
// certificate names differently, with ssl.principal.mapping.rules.)
func (s Security) Principal() string {
	if s.UsesSASL() && s.User != "" {
		return "User:" + s.User
	}
	if p := s.ClientCertPrincipal(); p != "" {
		return p
	}
	return AnonymousPrincipal
}

// mechanisms returns the SASL mechanisms to offer, in order (see the file
// comment), bound to certs for channel binding.
func (s Security) mechanisms(certs *peerCerts) []sasl.Mechanism {
	if !s.UsesSASL() {
		return nil
	}
	user, pass := s.User, s.Password
	sa := scram.Auth{User: user, Pass: pass}
	switch m := s.mechanism(); m {
	case MechPlain:
		return []sasl.Mechanism{plain.Auth{User: user, Pass: pass}.AsMechanism()}
	case MechScramSHA256Plus, MechScramSHA512Plus:
		return []sasl.Mechanism{newScramPlus(m, user, pass, certs)}
	case MechScramSHA256, MechScramSHA512:
		var fallback sasl.Mechanism
		if m == MechScramSHA256 {
			fallback = sa.AsSha256Mechanism()
		} else {
			fallback = sa.AsSha512Mechanism()
		}
		if !s.UsesTLS() || s.Mechanism != "" || s.noPlus {
			// Plain SCRAM: over plaintext, when asked for by name, or
			// when the broker does not offer channel binding.
			return []sasl.Mechanism{fallback}
		}
		return []sasl.Mechanism{newScramPlus(m+"-PLUS", user, pass, certs), fallback}
	}
	return nil // Validate refused it
}

// kgoOpts are the dialer and SASL options for one kgo client. Each kgo
// client gets its own peer-certificate record, shared by its dialer and its
// -PLUS mechanism. s is valid and cfg is its TLSConfig (nil: plaintext),
// read once by Options.prepare.
func (s Security) kgoOpts(cfg *tls.Config, dialTimeout time.Duration) []kgo.Opt {
	var opts []kgo.Opt
	certs := &peerCerts{}
	if cfg != nil {
		opts = append(opts, kgo.Dialer(tlsDialer(cfg, dialTimeout, certs)))
	}
	if ms := s.mechanisms(certs); len(ms) > 0 {
		opts = append(opts, kgo.SASL(ms...))
	}
	return opts
}

// dialError classifies a failed first contact: an answer from the broker
// (SASL refused: its Kafka code and message), a TLS failure, a SASL
// exchange the client itself stopped (wrong server signature), or no
// broker at all (ErrUnreachable).
func dialError(opts Options, err error) error {
	e := &Error{Op: "dial", Resource: opts.Addr, Err: err}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		e.Kafka = ke
		// kgo appends the broker's message after the code's name.
		if _, msg, ok := strings.Cut(err.Error(), ke.Error()+": "); ok {
			e.Detail = msg
		}
		return e
	}
	if _, ok := errors.AsType[*TLSError](err); ok {
		return e
	}
	if opts.Security.UsesSASL() && isSASLClientError(err) {
		return e
	}
	e.Err = fmt.Errorf("%w: %w", ErrUnreachable, err)
	if opts.Security.UsesSASL() && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		// Kafka answers a failed authentication with
		// SASL_AUTHENTICATION_FAILED, but some brokers (and kfake) just
		// close the connection.
		e.Detail = "some brokers close the connection on a wrong user, password or mechanism: check them"
	}
	return e
}

// isSASLClientError recognises a SASL exchange stopped on the client side
// (the mechanisms' own errors name their mechanism).
func isSASLClientError(err error) bool {
	s := err.Error()
	for _, m := range []string{MechScramSHA256, MechScramSHA512, MechPlain} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
