// Package auth owns how a connection proves who it is: the listener's TLS
// material and its live reload, the principal of a client certificate
// (Kafka's ssl.principal.mapping.rules), and the server side of the SASL
// mechanisms. It does no socket I/O of its own: net/kafka runs the
// handshakes on its connections, auth decides.
//
// Invariants: the TLS material in use is always a complete, parsed,
// matching set (certificate, key, client CAs); a reload that fails leaves
// the old set in use, and a good one applies to the next handshake only,
// never to connections already open. TLS 1.2 is the oldest version spoken.
// Session resumption is off on the server, so every handshake presents the
// certificate in use at that moment (a reload is seen at once, and SCRAM
// channel binding always knows the certificate of its connection).
package auth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ClientAuth says whether a TLS listener asks clients for a certificate.
type ClientAuth int

const (
	// ClientAuthDefault is "required" when a client CA is configured and
	// "none" otherwise.
	ClientAuthDefault ClientAuth = iota
	// ClientAuthNone never asks for a client certificate.
	ClientAuthNone
	// ClientAuthRequested asks for one and verifies it when given; a
	// client without one connects as User:ANONYMOUS (Kafka's
	// ssl.client.auth=requested).
	ClientAuthRequested
	// ClientAuthRequired refuses clients without a certificate the client
	// CA verifies (mTLS).
	ClientAuthRequired
)

// ParseClientAuth reads none, requested or required ("" is the default).
func ParseClientAuth(s string) (ClientAuth, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return ClientAuthDefault, nil
	case "none":
		return ClientAuthNone, nil
	case "requested":
		return ClientAuthRequested, nil
	case "required":
		return ClientAuthRequired, nil
	}
	return ClientAuthDefault, fmt.Errorf("%q: want none, requested or required", s)
}

func (a ClientAuth) String() string {
	switch a {
	case ClientAuthNone:
		return "none"
	case ClientAuthRequested:
		return "requested"
	case ClientAuthRequired:
		return "required"
	}
	return ""
}

// TLSOptions name the PEM files of a TLS listener and how it treats
// client certificates.
type TLSOptions struct {
	// CertFile holds the certificate chain (leaf first), KeyFile its
	// private key (PKCS#1, PKCS#8 or EC). Both are required.
	CertFile, KeyFile string
	// ClientCAFile holds the CA certificates that verify client
	// certificates (and, for connections this node makes to its peers,
	// their server certificates). Optional.
	ClientCAFile string
	ClientAuth   ClientAuth
	// PrincipalMapping is Kafka's ssl.principal.mapping.rules over the
	// RFC 2253 subject of a client certificate; empty gives User:<CN>.
	PrincipalMapping string
	Logger           *slog.Logger
}

// Validate checks the options without reading the files.
func (o TLSOptions) Validate() error {
	switch {
	case o.CertFile == "" && o.KeyFile == "":
		return errors.New("tls-cert and tls-key are required for TLS")
	case o.CertFile == "":
		return errors.New("tls-cert is required with tls-key")
	case o.KeyFile == "":
		return errors.New("tls-key is required with tls-cert")
	case o.ClientAuth < ClientAuthDefault || o.ClientAuth > ClientAuthRequired:
		return fmt.Errorf("tls-client-auth %d: unknown", int(o.ClientAuth))
	case (o.ClientAuth == ClientAuthRequested || o.ClientAuth == ClientAuthRequired) && o.ClientCAFile == "":
		return fmt.Errorf("tls-client-auth %s needs tls-client-ca, the CA that verifies client certificates", o.ClientAuth)
	}
	if _, err := ParsePrincipalMapping(o.PrincipalMapping); err != nil {
		return fmt.Errorf("tls-principal-mapping: %w", err)
	}
	return nil
}

// EffectiveClientAuth resolves ClientAuthDefault.
func (o TLSOptions) EffectiveClientAuth() ClientAuth {
	if o.ClientAuth != ClientAuthDefault {
		return o.ClientAuth
	}
	if o.ClientCAFile != "" {
		return ClientAuthRequired
	}
	return ClientAuthNone
}

// TLS is a listener's TLS material, reloadable while connections use it.
type TLS struct {
	opts       TLSOptions
	clientAuth ClientAuth
	mapper     *PrincipalMapper // nil: User:<CN>
	log        *slog.Logger

	reload sync.Mutex // one Reload at a time
	cur    atomic.Pointer[material]
}

// material is one complete, consistent set of files, immutable once built.
type material struct {
	cert      tls.Certificate // Leaf set
	clientCAs *x509.CertPool  // nil without a client CA file
	caCount   int
	server    *tls.Config // what the Kafka listener's handshakes use
	peer      *tls.Config // what the cluster port's handshakes use: client certificates required
	loadedAt  time.Time
}

// LoadTLS reads the files and builds the material; the error names the
// file at fault.
func LoadTLS(opts TLSOptions) (*TLS, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	mapper, err := ParsePrincipalMapping(opts.PrincipalMapping)
	if err != nil {
		return nil, fmt.Errorf("tls-principal-mapping: %w", err)
	}
	t := &TLS{opts: opts, clientAuth: opts.EffectiveClientAuth(), mapper: mapper, log: opts.Logger}
	m, err := t.load()
	if err != nil {
		return nil, err
	}
	t.cur.Store(m)
	return t, nil
}

// Options are the options the material was loaded with.
func (t *TLS) Options() TLSOptions { return t.opts }

// ClientAuth is the effective client-certificate policy.
func (t *TLS) ClientAuth() ClientAuth { return t.clientAuth }

// Leaf is the certificate presented to the next handshake.
func (t *TLS) Leaf() *x509.Certificate { return t.cur.Load().cert.Leaf }

// Reload re-reads the files. On success the next handshake presents the
// new certificate and verifies clients with the new CAs; connections
// already open keep what they negotiated. On failure the old material
// stays in use and the error (naming the file) is logged and returned.
func (t *TLS) Reload() error {
	t.reload.Lock()
	defer t.reload.Unlock()
	m, err := t.load()
	if err != nil {
		t.log.Error("TLS reload failed; still using the previous certificate", "err", err,
			"serial", t.Leaf().SerialNumber.String())
		return err
	}
	old := t.cur.Swap(m)
	t.log.Info("TLS material reloaded", "cert", t.opts.CertFile, "subject", m.cert.Leaf.Subject.String(),
		"serial", m.cert.Leaf.SerialNumber.String(), "previous_serial", old.cert.Leaf.SerialNumber.String(),
		"not_after", m.cert.Leaf.NotAfter.UTC().Format(time.RFC3339), "client_cas", m.caCount)
	return nil
}

// maxPEMFile bounds what is read from a certificate, key or CA file: a
// path pointed at a huge file by mistake must not fill the memory.
const maxPEMFile = 8 << 20

func readPEMFile(what, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if st.Size() > maxPEMFile {
		return nil, fmt.Errorf("%s %s: %d bytes is more than a PEM file of certificates can sensibly be (limit %d)", what, path, st.Size(), maxPEMFile)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return b, nil
}

func (t *TLS) load() (*material, error) {
	certPEM, err := readPEMFile("tls-cert", t.opts.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEMFile("tls-key", t.opts.KeyFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls-cert %s with tls-key %s: %w", t.opts.CertFile, t.opts.KeyFile, err)
	}
	if cert.Leaf == nil { // set by X509KeyPair since Go 1.23; keep it explicit
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls-cert %s: %w", t.opts.CertFile, err)
		}
	}
	now := time.Now()
	if now.After(cert.Leaf.NotAfter) || now.Before(cert.Leaf.NotBefore) {
		// Still loaded: refusing to start would not make clients trust it,
		// and the operator sees why their handshakes fail.
		t.log.Warn("the TLS certificate is not valid now", "cert", t.opts.CertFile,
			"not_before", cert.Leaf.NotBefore.UTC().Format(time.RFC3339), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	m := &material{cert: cert, loadedAt: now}
	if t.opts.ClientCAFile != "" {
		caPEM, err := readPEMFile("tls-client-ca", t.opts.ClientCAFile)
		if err != nil {
			return nil, err
		}
		if m.clientCAs, m.caCount, err = parseCAs(caPEM); err != nil {
			return nil, fmt.Errorf("tls-client-ca %s: %w", t.opts.ClientCAFile, err)
		}
	}
	m.server = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    m.clientCAs,
		ClientAuth:   stdClientAuth(t.clientAuth),
		// Every handshake is a full one, so it presents the certificate in
		// use now and each connection knows the certificate it got.
		SessionTicketsDisabled: true,
	}
	m.peer = m.server.Clone()
	m.peer.ClientAuth = tls.RequireAndVerifyClientCert
	return m, nil
}

// parseCAs reads every CERTIFICATE block; anything else in the file, or no
// certificate at all, is an error (a key pasted into the CA file by
// mistake must not pass silently).
func parseCAs(b []byte) (*x509.CertPool, int, error) {
	pool := x509.NewCertPool()
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, 0, fmt.Errorf("PEM block %d is a %q, want CERTIFICATE", n+1, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, 0, fmt.Errorf("certificate %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, 0, errors.New("no PEM certificate found")
	}
	if len(strings.TrimSpace(string(b))) != 0 {
		return nil, 0, fmt.Errorf("garbage after certificate %d", n)
	}
	return pool, n, nil
}

func stdClientAuth(a ClientAuth) tls.ClientAuthType {
	switch a {
	case ClientAuthRequested:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// ServerConfig is the configuration of a server handshake: each handshake
// takes the material current when the client's hello arrives. presented,
// when not nil, is called during the handshake with the certificate the
// server presents (channel binding needs it: the server's own certificate
// is not in its tls.ConnectionState). Make one per connection when passing
// presented; one may be shared otherwise.
func (t *TLS) ServerConfig(presented func(leaf *x509.Certificate)) *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS12,
		SessionTicketsDisabled: true,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := t.cur.Load()
			if presented != nil {
				presented(m.cert.Leaf)
			}
			return m.server, nil
		},
	}
}

// PeerServerConfig is the configuration of the cluster port (Raft and the
// controller RPC between nodes): like the Kafka listener's, but a peer
// must always present a certificate the client CA verifies, whatever
// ClientAuth says for Kafka clients.
func (t *TLS) PeerServerConfig() *tls.Config { return t.PeerServerConfigFor(nil) }

// PeerServerConfigFor is PeerServerConfig that also admits only the peers
// whose verified certificate allowed accepts (nil: every certificate the
// CA verifies): the cluster port admits brokers, not every client the CA
// has a certificate for.
func (t *TLS) PeerServerConfigFor(allowed func(leaf *x509.Certificate) error) *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS12,
		SessionTicketsDisabled: true,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			peer := t.cur.Load().peer
			if allowed == nil {
				return peer, nil
			}
			c := peer.Clone()
			c.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("tls: the peer presented no certificate")
				}
				return allowed(cs.PeerCertificates[0])
			}
			return c, nil
		},
	}
}

// SameSubject reports whether cert names the same subject (the whole
// distinguished name, not only its CN) as this node's own certificate.
func (t *TLS) SameSubject(cert *x509.Certificate) bool {
	leaf := t.Leaf()
	return leaf != nil && bytes.Equal(leaf.RawSubject, cert.RawSubject)
}

// PrincipalOf is the principal a verified certificate maps to, by this
// listener's rules.
func (t *TLS) PrincipalOf(cert *x509.Certificate) (string, error) {
	return CertificatePrincipal(cert, t.mapper)
}

// Dial connects to a peer's TLS port at addr (host:port) and runs the
// handshake of ClientConfig(host) within ctx.
func (t *TLS) Dial(ctx context.Context, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("tls dial %q: %w", addr, err)
	}
	d := &tls.Dialer{Config: t.ClientConfig(host)}
	return d.DialContext(ctx, "tcp", addr)
}

// ClientConfig is the configuration of a connection this node makes to a
// peer's TLS listener: it presents this node's certificate when asked
// (mTLS between nodes) and verifies the peer's certificate for serverName
// (a host name or IP) against the client CA file, or the system's roots
// without one. Both follow reloads.
func (t *TLS) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c := t.cur.Load().cert
			return &c, nil
		},
		// The roots change on reload, which RootCAs cannot follow: the
		// standard verification is replaced by the same one against the
		// current roots (chain and name), in VerifyConnection.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return t.verifyServer(cs)
		},
	}
}

func (t *TLS) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the peer presented no certificate")
	}
	opts := x509.VerifyOptions{
		Roots:         t.cur.Load().clientCAs, // nil: the system's roots
		DNSName:       cs.ServerName,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: verifying the peer's certificate: %w", err)
	}
	return nil
}

// Principal is the principal of the client certificate a handshake
// verified: "User:<CN>", or what the principal mapping rules make of the
// subject. ok is false when the client presented no verified certificate
// (it is then User:ANONYMOUS to Kafka). An error means a certificate no
// rule maps: Kafka refuses such a connection.
func (t *TLS) Principal(cs tls.ConnectionState) (principal string, ok bool, err error) {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return "", false, nil
	}
	p, err := CertificatePrincipal(cs.PeerCertificates[0], t.mapper)
	if err != nil {
		return "", false, err
	}
	return p, true, nil
}

// LeafPrincipal is the principal this node's own certificate maps to: what
// its peers see it as when it presents the certificate to their mTLS
// listeners.
func (t *TLS) LeafPrincipal() (principal string, ok bool, err error) {
	leaf := t.Leaf()
	if leaf == nil {
		return "", false, nil
	}
	p, err := CertificatePrincipal(leaf, t.mapper)
	if err != nil {
		return "", false, err
	}
	return p, true, nil
}
