package auth

import (
	"crypto/hmac"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/net/protoext"
)

// SCRAM (RFC 5802, RFC 7677) from the server's side. The exchange is:
//
//	client-first  n,,n=user,r=cnonce           (gs2 header, then the "bare" part)
//	server-first  r=cnonce+snonce,s=salt,i=4096
//	client-final  c=base64(gs2 header + binding),r=cnonce+snonce,p=proof
//	server-final  v=server signature
//
// The server proves it knows ServerKey, the client that it knows the key
// whose hash is StoredKey; neither sends the password.

// Channel binding types (RFC 5929, RFC 9266).
const (
	BindingServerEndPoint = "tls-server-end-point"
	BindingExporter       = "tls-exporter"
)

type scramSession struct {
	s         *Server
	mechanism string // as negotiated, e.g. SCRAM-SHA-256-PLUS
	credMech  string // the credential's, e.g. SCRAM-SHA-256
	plus      bool
	ci        ConnInfo
	h         func() hash.Hash

	state       int // 0: want client-first, 1: want client-final, 2: done
	user        string
	gs2Header   string
	bindingData []byte // what a -PLUS client must bind to
	clientBare  string
	serverFirst string
	nonce       string // client nonce + server nonce
	cred        metadata.ScramCredential
	unknown     bool // cred is the fake of an unknown user
	principal   string
}

func newScramSession(s *Server, mechanism, credMech string, plus bool, ci ConnInfo) *scramSession {
	return &scramSession{s: s, mechanism: mechanism, credMech: credMech, plus: plus, ci: ci, h: metadata.ScramHash(credMech)}
}

func (x *scramSession) Principal() string { return x.principal }
func (x *scramSession) User() string      { return x.user }
func (x *scramSession) Mechanism() string { return x.mechanism }

func (x *scramSession) Step(msg []byte) ([]byte, bool, error) {
	if len(msg) > MaxMessageSize {
		x.state = 2
		return nil, true, refuse("malformed SCRAM message: %d bytes exceeds %d", len(msg), MaxMessageSize)
	}
	switch x.state {
	case 0:
		reply, err := x.clientFirst(string(msg))
		if err != nil {
			x.state = 2
			return nil, true, err
		}
		x.state = 1
		return reply, false, nil
	case 1:
		x.state = 2
		reply, err := x.clientFinal(string(msg))
		if err != nil {
			return nil, true, err
		}
		return reply, true, nil
	}
	return nil, true, refuse("SCRAM exchange already finished")
}

// ClientFirst is a parsed client-first-message.
type ClientFirst struct {
	CBFlag     string // "n", "y" or "p"
	CBName     string // with "p"
	AuthzID    string
	User       string
	Nonce      string
	Extensions map[string]string
	GS2Header  string // "n,," etc., verbatim
	Bare       string // client-first-message-bare, verbatim
}

// ParseClientFirst parses a SCRAM client-first-message (RFC 5802 7).
func ParseClientFirst(msg string) (ClientFirst, error) {
	var cf ClientFirst
	if len(msg) > MaxMessageSize {
		return cf, refuse("malformed client-first message: %d bytes", len(msg))
	}
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return cf, refuse("malformed client-first message: no GS2 header")
	}
	switch {
	case flag == "n" || flag == "y":
		cf.CBFlag = flag
	case strings.HasPrefix(flag, "p="):
		cf.CBFlag, cf.CBName = "p", flag[2:]
		if !validCBName(cf.CBName) {
			return cf, refuse("malformed client-first message: bad channel binding name")
		}
	default:
		return cf, refuse("malformed client-first message: bad channel binding flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return cf, refuse("malformed client-first message: GS2 header not terminated")
	}
	if authz != "" {
		v, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return cf, refuse("malformed client-first message: bad authorization id")
		}
		name, err := decodeSaslName(v)
		if err != nil {
			return cf, err
		}
		cf.AuthzID = name
	}
	cf.GS2Header = msg[:len(msg)-len(bare)]
	cf.Bare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 {
		return cf, refuse("malformed client-first message: want n=user,r=nonce")
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return cf, refuse("malformed client-first message: mandatory extension m= is not supported")
	}
	u, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return cf, refuse("malformed client-first message: want n=user first")
	}
	name, err := decodeSaslName(u)
	if err != nil {
		return cf, err
	}
	if name == "" {
		return cf, refuse("malformed client-first message: empty user name")
	}
	cf.User = name
	n, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !validNonce(n) {
		return cf, refuse("malformed client-first message: want r=nonce of printable characters")
	}
	cf.Nonce = n
	ext, err := parseExtensions(attrs[2:])
	if err != nil {
		return cf, err
	}
	cf.Extensions = ext
	return cf, nil
}

// parseExtensions reads Kafka's SCRAM extensions (key=value attributes
// after the nonce, e.g. tokenauth=true).
func parseExtensions(attrs []string) (map[string]string, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	if len(attrs) > 32 {
		return nil, refuse("malformed SCRAM message: %d extensions", len(attrs))
	}
	out := make(map[string]string, len(attrs))
	for _, a := range attrs {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, refuse("malformed SCRAM message: bad extension attribute")
		}
		out[k] = v
	}
	return out, nil
}

// ClientFinal is a parsed client-final-message.
type ClientFinal struct {
	Binding         []byte // decoded c=
	Nonce           string
	Proof           []byte
	WithoutProof    string // client-final-message-without-proof, verbatim
	ExtensionsCount int
}

// ParseClientFinal parses a SCRAM client-final-message (RFC 5802 7).
func ParseClientFinal(msg string) (ClientFinal, error) {
	var cf ClientFinal
	if len(msg) > MaxMessageSize {
		return cf, refuse("malformed client-final message: %d bytes", len(msg))
	}
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return cf, refuse("malformed client-final message: no proof")
	}
	cf.WithoutProof = msg[:i]
	proof, err := base64.StdEncoding.Strict().DecodeString(msg[i+3:])
	if err != nil || len(proof) == 0 {
		return cf, refuse("malformed client-final message: proof is not base64")
	}
	cf.Proof = proof
	attrs := strings.Split(cf.WithoutProof, ",")
	if len(attrs) < 2 {
		return cf, refuse("malformed client-final message: want c=...,r=...,p=...")
	}
	c, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return cf, refuse("malformed client-final message: want c= first")
	}
	if cf.Binding, err = base64.StdEncoding.Strict().DecodeString(c); err != nil {
		return cf, refuse("malformed client-final message: channel binding is not base64")
	}
	r, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !validNonce(r) {
		return cf, refuse("malformed client-final message: want r=nonce second")
	}
	cf.Nonce = r
	ext, err := parseExtensions(attrs[2:])
	if err != nil {
		return cf, err
	}
	cf.ExtensionsCount = len(ext)
	return cf, nil
}

// decodeSaslName undoes RFC 5802's escaping of ',' (=2C) and '=' (=3D);
// any other '=' is malformed, and so is a NUL or invalid UTF-8.
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return "", refuse("malformed SCRAM user name")
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", refuse("malformed SCRAM user name: bad '=' escape")
		}
		i += 2
	}
	out := b.String()
	if strings.IndexByte(out, 0) >= 0 || !utf8.ValidString(out) {
		return "", refuse("malformed SCRAM user name")
	}
	return out, nil
}

// EncodeSaslName escapes a name for a SCRAM message.
func EncodeSaslName(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

func validNonce(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

func validCBName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func (x *scramSession) clientFirst(msg string) ([]byte, error) {
	cf, err := ParseClientFirst(msg)
	if err != nil {
		return nil, err
	}
	x.user = cf.User
	switch {
	case x.plus && cf.CBFlag != "p":
		return nil, refuse("%s requires channel binding, but the client did not ask for it", x.mechanism)
	case !x.plus && cf.CBFlag == "p":
		return nil, refuse("channel binding requested with %s; use %s-PLUS", x.mechanism, x.mechanism)
	case cf.CBFlag == "y" && x.s.offersPlus(x.ci):
		// RFC 5802 6: the client could bind but thinks the server
		// cannot; the server offers -PLUS, so someone removed it from
		// what the client saw.
		return nil, refuse("channel binding downgrade detected: the server offers SCRAM -PLUS mechanisms on this connection")
	}
	if x.plus {
		data, err := BindingData(cf.CBName, x.ci.TLS, x.ci.ServerCert)
		if err != nil {
			return nil, refuse("%v", err)
		}
		x.bindingData = data
	}
	if cf.AuthzID != "" && cf.AuthzID != cf.User {
		return nil, refuse("authorization id %q differs from the user name", cf.AuthzID)
	}
	if v, ok := cf.Extensions["tokenauth"]; ok && strings.EqualFold(v, "true") {
		return nil, refuse("delegation tokens are not supported")
	}
	x.gs2Header, x.clientBare = cf.GS2Header, cf.Bare
	cred, ok := x.s.cfg.Credentials.ScramCredential(cf.User, x.credMech)
	if !ok || len(cred.Salt) == 0 || cred.Iterations <= 0 || len(cred.StoredKey) != x.h().Size() || len(cred.ServerKey) != x.h().Size() {
		cred, x.unknown = x.s.fakeCredential(cf.User, x.credMech), true
	}
	x.cred = cred
	x.nonce = cf.Nonce + x.s.nonce()
	x.serverFirst = "r=" + x.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	return []byte(x.serverFirst), nil
}

func (x *scramSession) clientFinal(msg string) ([]byte, error) {
	cf, err := ParseClientFinal(msg)
	if err != nil {
		return nil, err
	}
	want := append([]byte(x.gs2Header), x.bindingData...)
	if subtle.ConstantTimeCompare(cf.Binding, want) != 1 {
		if x.plus {
			return nil, refuse("channel binding does not match this TLS connection (a proxy in between, or a client bound to other data)")
		}
		return nil, refuse("channel binding attribute does not repeat the GS2 header")
	}
	// RFC 5802 wants the nonce repeated exactly; Kafka accepts one that
	// ends with it, and librdkafka (kcat) relies on that: it sends its
	// own nonce again in front of the server's. The server's random
	// part is still at the end, so a replayed exchange cannot match.
	if !strings.HasSuffix(cf.Nonce, x.nonce) {
		return nil, refuse("nonce does not end with the server's")
	}
	size := x.h().Size()
	if len(cf.Proof) != size {
		return nil, fail("proof of %d bytes, want %d", len(cf.Proof), size)
	}
	authMessage := x.clientBare + "," + x.serverFirst + "," + cf.WithoutProof
	clientSig := hmacSum(x.h, x.cred.StoredKey, authMessage)
	clientKey := make([]byte, size)
	subtle.XORBytes(clientKey, cf.Proof, clientSig)
	hk := x.h()
	hk.Write(clientKey)
	if subtle.ConstantTimeCompare(hk.Sum(nil), x.cred.StoredKey) != 1 || x.unknown {
		if x.unknown {
			return nil, fail("unknown user %q", x.user)
		}
		return nil, fail("wrong password for user %q", x.user)
	}
	x.principal = "User:" + x.user
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSum(x.h, x.cred.ServerKey, authMessage))), nil
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// BindingData is the channel binding data of a TLS connection (the server's
// side): for tls-server-end-point (RFC 5929 4.1) the hash of the
// certificate the server presented, with the hash of its signature
// algorithm (SHA-256 for MD5 and SHA-1); for tls-exporter (RFC 9266) 32
// bytes of the TLS 1.3 exporter with label "EXPORTER-Channel-Binding" and
// no context.
func BindingData(name string, state *tls.ConnectionState, cert *x509.Certificate) ([]byte, error) {
	if state == nil {
		return nil, fmt.Errorf("channel binding %s needs TLS", name)
	}
	switch name {
	case BindingServerEndPoint:
		if cert == nil {
			return nil, fmt.Errorf("channel binding %s: the server certificate of this connection is not known", name)
		}
		return ServerEndPoint(cert)
	case BindingExporter:
		if state.Version != tls.VersionTLS13 {
			return nil, fmt.Errorf("channel binding %s needs TLS 1.3 (this connection is %s); use %s", name, tls.VersionName(state.Version), BindingServerEndPoint)
		}
		return state.ExportKeyingMaterial("EXPORTER-Channel-Binding", nil, 32)
	}
	return nil, fmt.Errorf("channel binding type %q is not supported (want %s or %s)", name, BindingServerEndPoint, BindingExporter)
}

// ServerEndPoint is the tls-server-end-point binding of a certificate
// (net/protoext computes it, for the toolkit too).
func ServerEndPoint(cert *x509.Certificate) ([]byte, error) {
	cb, err := protoext.TLSServerEndPoint(cert)
	if err != nil {
		return nil, fmt.Errorf("channel binding %s: %w; use %s over TLS 1.3", BindingServerEndPoint, err, BindingExporter)
	}
	return cb, nil
}
