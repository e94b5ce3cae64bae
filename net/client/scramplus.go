package client

// SCRAM-SHA-256-PLUS and SCRAM-SHA-512-PLUS (RFC 5802 with channel
// binding, RFC 5929 tls-server-end-point).
//
// franz-go's sasl.Mechanism.Authenticate is given the broker's address and
// nothing of the connection, so the channel-binding data cannot come from
// the connection itself. Instead, the toolkit's TLS dialer (tlsDialer)
// records each handshake's peer certificate under the address it dialed,
// which is the same string kgo passes to Authenticate (broker.addr), and
// the mechanism looks it up. Two connections to the same address present
// the same certificate except across a certificate reload on the broker;
// then a connection may bind to its neighbour's certificate, the broker
// refuses it, and kgo dials again.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/moonmq/moonmq/net/protoext"
)

// peerCerts is the leaf certificate each TLS connection's peer presented,
// by dialed address. It is bounded by the number of brokers dialed.
type peerCerts struct {
	mu sync.Mutex
	m  map[string]*x509.Certificate
}

func (p *peerCerts) set(addr string, c *x509.Certificate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*x509.Certificate{}
	}
	p.m[addr] = c
}

func (p *peerCerts) get(addr string) *x509.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[addr]
}

// tlsDialer dials TCP, completes the TLS handshake within timeout (and
// ctx), and records the peer's certificate for channel binding. The server
// name defaults to the host of the address, as kgo.DialTLSConfig does.
func tlsDialer(cfg *tls.Config, timeout time.Duration, certs *peerCerts) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := &net.Dialer{Timeout: timeout}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			c.ServerName = host
		}
		tc := tls.Client(raw, c)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, &TLSError{Addr: addr, Err: err}
		}
		if st := tc.ConnectionState(); len(st.PeerCertificates) > 0 {
			certs.set(addr, st.PeerCertificates[0])
		}
		return tc, nil
	}
}

// TLSError is a failed TLS handshake: a certificate the toolkit does not
// trust, a broker that does not speak TLS, or a refused client
// certificate.
type TLSError struct {
	Addr string
	Err  error
}

func (e *TLSError) Error() string {
	return fmt.Sprintf("TLS handshake with %s failed: %v", e.Addr, e.Err)
}

func (e *TLSError) Unwrap() error { return e.Err }

// TLSServerEndPoint is RFC 5929's tls-server-end-point channel-binding
// data of cert (net/protoext's, which the broker computes too).
func TLSServerEndPoint(cert *x509.Certificate) ([]byte, error) {
	cb, err := protoext.TLSServerEndPoint(cert)
	if err != nil {
		return nil, fmt.Errorf("%w (use SCRAM without -PLUS)", err)
	}
	return cb, nil
}

// scramPlus is a SCRAM-SHA-x-PLUS sasl.Mechanism.
type scramPlus struct {
	name       string
	newHash    func() hash.Hash
	user, pass string
	certs      *peerCerts
	nonce      func() []byte // tests fix it
	maxIters   int           // scramMaxIterations; the fuzz test lowers it
}

func newScramPlus(name, user, pass string, certs *peerCerts) *scramPlus {
	nh := sha256.New
	if strings.HasPrefix(name, MechScramSHA512) {
		nh = sha512.New
	}
	return &scramPlus{name: name, newHash: nh, user: user, pass: pass, certs: certs, nonce: randomNonce, maxIters: scramMaxIterations}
}

func randomNonce() []byte {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return []byte(base64.RawStdEncoding.EncodeToString(b))
}

func (m *scramPlus) Name() string { return m.name }

// gs2CBHeader is the GS2 header of a client that requires channel binding
// of type tls-server-end-point and sends no authorization id.
const gs2CBHeader = "p=tls-server-end-point,,"

var scramEscaper = strings.NewReplacer("=", "=3D", ",", "=2C")

func (m *scramPlus) Authenticate(_ context.Context, addr string) (sasl.Session, []byte, error) {
	cert := m.certs.get(addr)
	if cert == nil {
		return nil, nil, fmt.Errorf("%s: no TLS certificate recorded for %s (channel binding needs TLS)", m.name, addr)
	}
	cb, err := TLSServerEndPoint(cert)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.name, err)
	}
	return m.start(gs2CBHeader, cb)
}

// start begins a session with the given GS2 header, binding to cb (the
// tests also run RFC 7677's vector, which has header "n,," and no cb).
func (m *scramPlus) start(gs2Header string, cb []byte) (*scramSession, []byte, error) {
	if m.user == "" || m.pass == "" {
		return nil, nil, fmt.Errorf("%s: user and password must be non-empty", m.name)
	}
	nonce := m.nonce()
	bare := "n=" + scramEscaper.Replace(m.user) + ",r=" + string(nonce)
	s := &scramSession{
		newHash:   m.newHash,
		pass:      m.pass,
		nonce:     nonce,
		bare:      bare,
		cbInput:   append([]byte(gs2Header), cb...),
		mechanism: m.name,
		maxIters:  m.maxIters,
	}
	return s, []byte(gs2Header + bare), nil
}

// scramSession is one SCRAM exchange (client side).
type scramSession struct {
	newHash   func() hash.Hash
	pass      string
	nonce     []byte
	bare      string // client-first-message-bare
	cbInput   []byte // gs2 header + channel-binding data: c= of the final message
	mechanism string
	step      int
	serverSig []byte
	maxIters  int
}

// Limits a broker's server-first message must respect. Kafka allows
// 4096..16384 iterations; the cap keeps a hostile broker from making
// PBKDF2 run for minutes.
const (
	scramMinIterations = 4096
	scramMaxIterations = 1 << 20
)

func (s *scramSession) Challenge(in []byte) (bool, []byte, error) {
	s.step++
	switch s.step {
	case 1:
		out, err := s.clientFinal(in)
		return false, out, err
	case 2:
		return true, nil, s.verifyServerFinal(in)
	}
	return false, nil, fmt.Errorf("%s: unexpected message after the exchange ended", s.mechanism)
}

// parseSCRAMAttrs splits "a=v,b=w" into ordered attributes; it refuses
// anything that is not attr=value.
func parseSCRAMAttrs(msg []byte) ([][2]string, error) {
	var out [][2]string
	for _, f := range bytes.Split(msg, []byte(",")) {
		if len(f) < 2 || f[1] != '=' {
			return nil, fmt.Errorf("malformed attribute %q", f)
		}
		out = append(out, [2]string{string(f[:1]), string(f[2:])})
	}
	return out, nil
}

// clientFinal answers the server-first message
// (r=nonce,s=salt,i=iterations[,ext]).
func (s *scramSession) clientFinal(serverFirst []byte) ([]byte, error) {
	attrs, err := parseSCRAMAttrs(serverFirst)
	if err != nil {
		return nil, fmt.Errorf("%s: server-first message: %w", s.mechanism, err)
	}
	if len(attrs) > 0 && attrs[0][0] == "e" {
		return nil, fmt.Errorf("%s: broker refused: %s", s.mechanism, attrs[0][1])
	}
	if len(attrs) < 3 || attrs[0][0] == "m" || attrs[0][0] != "r" || attrs[1][0] != "s" || attrs[2][0] != "i" {
		return nil, fmt.Errorf("%s: server-first message is not r=,s=,i=: %q", s.mechanism, serverFirst)
	}
	serverNonce := attrs[0][1]
	if !strings.HasPrefix(serverNonce, string(s.nonce)) || len(serverNonce) == len(s.nonce) {
		return nil, fmt.Errorf("%s: broker's nonce does not extend the client's", s.mechanism)
	}
	salt, err := base64.StdEncoding.DecodeString(attrs[1][1])
	if err != nil || len(salt) == 0 {
		return nil, fmt.Errorf("%s: bad salt %q", s.mechanism, attrs[1][1])
	}
	iters, err := strconv.Atoi(attrs[2][1])
	if err != nil || iters < scramMinIterations || iters > s.maxIters {
		return nil, fmt.Errorf("%s: iteration count %q out of range [%d, %d]", s.mechanism, attrs[2][1], scramMinIterations, s.maxIters)
	}

	size := s.newHash().Size()
	salted, err := pbkdf2.Key(s.newHash, s.pass, salt, iters, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.mechanism, err)
	}
	clientKey := s.hmac(salted, []byte("Client Key"))
	h := s.newHash()
	h.Write(clientKey)
	storedKey := h.Sum(nil)

	withoutProof := "c=" + base64.StdEncoding.EncodeToString(s.cbInput) + ",r=" + serverNonce
	authMsg := []byte(s.bare + "," + string(serverFirst) + "," + withoutProof)
	proof := s.hmac(storedKey, authMsg)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	s.serverSig = s.hmac(s.hmac(salted, []byte("Server Key")), authMsg)
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
}

// verifyServerFinal checks v=ServerSignature (or reports e=error).
func (s *scramSession) verifyServerFinal(msg []byte) error {
	attrs, err := parseSCRAMAttrs(msg)
	if err != nil {
		return fmt.Errorf("%s: server-final message: %w", s.mechanism, err)
	}
	switch attrs[0][0] {
	case "e":
		return fmt.Errorf("%s: broker refused: %s", s.mechanism, attrs[0][1])
	case "v":
		got, err := base64.StdEncoding.DecodeString(attrs[0][1])
		if err != nil || !hmac.Equal(got, s.serverSig) {
			return errors.New(s.mechanism + ": the broker's signature is wrong: it does not know the password, or the TLS channel is not the one it signed")
		}
		return nil
	}
	return fmt.Errorf("%s: server-final message is neither v= nor e=: %q", s.mechanism, msg)
}

func (s *scramSession) hmac(key, msg []byte) []byte {
	m := hmac.New(s.newHash, key)
	m.Write(msg)
	return m.Sum(nil)
}
