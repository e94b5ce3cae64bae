package testcerts

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
)

// PKI is a CA with one server and one client certificate, written as PEM
// files in a test's temp dir: what a client-side TLS test needs.
type PKI struct {
	// CAFile is the CA certificate (PEM).
	CAFile string
	// ServerCert/ServerKey are PEM files of the server certificate (for
	// 127.0.0.1, ::1 and localhost, CN "broker").
	ServerCert, ServerKey string
	// ClientCert/ClientKey are PEM files of the client certificate.
	ClientCert, ClientKey string
	// Pool holds the CA.
	Pool *x509.CertPool
	// Server is the server certificate, ready for a tls.Config (Leaf set).
	Server tls.Certificate
}

// NewPKI makes a PKI whose client certificate has common name clientCN.
func NewPKI(tb testing.TB, clientCN string) *PKI {
	tb.Helper()
	dir := tb.TempDir()
	ca := NewCA(tb, "moonmq test CA")
	server := ca.Server(tb, "broker")
	p := &PKI{CAFile: ca.Write(tb, dir, "ca"), Pool: ca.Pool(), Server: server.TLS(tb)}
	p.Server.Leaf = server.Cert
	p.ServerCert, p.ServerKey = server.Write(tb, dir, "broker")
	p.ClientCert, p.ClientKey = ca.Client(tb, pkix.Name{CommonName: clientCN}).Write(tb, dir, clientCN)
	return p
}

// ServerTLS is a listener config with the server certificate; clientCA
// requires and verifies client certificates (mTLS).
func (p *PKI) ServerTLS(clientCA bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.Server}, MinVersion: tls.VersionTLS12}
	if clientCA {
		c.ClientCAs, c.ClientAuth = p.Pool, tls.RequireAndVerifyClientCert
	}
	return c
}
