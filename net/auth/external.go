package auth

import (
	"crypto/x509"
	"fmt"
	"strings"
)

// EXTERNAL (RFC 4422 appendix A): the client is who its verified TLS
// certificate says; its one message is an authorization id, empty or the
// certificate's own user name.

type externalSession struct {
	s         *Server
	ci        ConnInfo
	user      string
	principal string
	done      bool
}

func (e *externalSession) Principal() string { return e.principal }
func (e *externalSession) User() string      { return e.user }
func (e *externalSession) Mechanism() string { return MechExternal }

func (e *externalSession) Step(msg []byte) ([]byte, bool, error) {
	if e.done {
		return nil, true, refuse("EXTERNAL exchange already finished")
	}
	e.done = true
	if len(msg) > MaxMessageSize {
		return nil, true, refuse("malformed EXTERNAL message: %d bytes", len(msg))
	}
	if e.ci.TLS == nil || len(e.ci.TLS.VerifiedChains) == 0 || len(e.ci.TLS.VerifiedChains[0]) == 0 {
		return nil, true, refuse("EXTERNAL needs a verified TLS client certificate")
	}
	principal := e.ci.CertPrincipal
	if principal == "" {
		p, err := e.certPrincipal(e.ci.TLS.VerifiedChains[0][0])
		if err != nil {
			return nil, true, refuse("%v", err)
		}
		principal = p
	}
	e.user = strings.TrimPrefix(principal, "User:")
	if authz := string(msg); authz != "" && authz != e.user && authz != principal {
		return nil, true, refuse("authorization id %q differs from the certificate's principal %s", authz, principal)
	}
	e.principal = principal
	return nil, true, nil
}

func (e *externalSession) certPrincipal(cert *x509.Certificate) (string, error) {
	if e.s.cfg.CertPrincipal != nil {
		return e.s.cfg.CertPrincipal(cert)
	}
	if cert.Subject.CommonName == "" {
		return "", fmt.Errorf("the client certificate's subject has no CN")
	}
	return "User:" + cert.Subject.CommonName, nil
}
