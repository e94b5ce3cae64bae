package main

import (
	"flag"

	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
	"github.com/moonmq/moonmq/node"
)

// tlsFlags are the Kafka listener's security protocol and TLS settings of
// `moonmq serve`. Values are checked as they are parsed (flag, config file
// or environment), so a bad one is refused with its flag named; the
// combinations (SSL needs a certificate and a key, ...) by node.Config's
// Validate. The files are read when the node opens, and again on SIGHUP.
type tlsFlags struct {
	protocol         protocolValue
	cert, key, ca    string
	clientAuth       clientAuthValue
	principalMapping mappingValue
}

func addTLSFlags(fs *flag.FlagSet) *tlsFlags {
	f := &tlsFlags{protocol: protocolValue{kafka.ProtocolPlaintext}}
	fs.Var(&f.protocol, "security-protocol",
		"the Kafka listener's security `protocol`: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's security.protocol)")
	fs.StringVar(&f.cert, "tls-cert", "",
		"PEM file of the listener's certificate chain, leaf first (SSL, SASL_SSL); re-read on SIGHUP")
	fs.StringVar(&f.key, "tls-key", "", "PEM file of the certificate's private key; re-read on SIGHUP")
	fs.StringVar(&f.ca, "tls-client-ca", "",
		"PEM file of the CA certificates that verify client certificates (mTLS); re-read on SIGHUP")
	fs.Var(&f.clientAuth, "tls-client-auth",
		"client certificates: `mode` none, requested (verified when given) or required (default: required with --tls-client-ca, else none)")
	fs.Var(&f.principalMapping, "tls-principal-mapping",
		"`rules` mapping a client certificate's RFC 2253 subject to its principal (Kafka's ssl.principal.mapping.rules), e.g. 'RULE:^CN=(.*?),OU=apps.*$/$1/L,DEFAULT' "+
			"(default: User:<CN>; DEFAULT is the whole subject)")
	return f
}

// apply sets the node's security settings.
func (f *tlsFlags) apply(c *node.Config) {
	c.SecurityProtocol = f.protocol.p
	if f.cert == "" && f.key == "" && f.ca == "" && f.clientAuth.a == auth.ClientAuthDefault && f.principalMapping == "" {
		return
	}
	c.TLS = auth.TLSOptions{CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.ca,
		ClientAuth: f.clientAuth.a, PrincipalMapping: string(f.principalMapping)}
}

// protocolValue is --security-protocol.
type protocolValue struct{ p kafka.SecurityProtocol }

func (v *protocolValue) String() string {
	if v == nil || v.p == "" {
		return string(kafka.ProtocolPlaintext)
	}
	return string(v.p)
}

func (v *protocolValue) Set(s string) error {
	p, err := kafka.ParseSecurityProtocol(s)
	if err != nil {
		return err
	}
	v.p = p
	return nil
}

// clientAuthValue is --tls-client-auth.
type clientAuthValue struct{ a auth.ClientAuth }

func (v *clientAuthValue) String() string {
	if v == nil {
		return ""
	}
	return v.a.String()
}

func (v *clientAuthValue) Set(s string) error {
	a, err := auth.ParseClientAuth(s)
	if err != nil {
		return err
	}
	v.a = a
	return nil
}

// mappingValue is --tls-principal-mapping, checked as it is set.
type mappingValue string

func (v *mappingValue) String() string {
	if v == nil {
		return ""
	}
	return string(*v)
}

func (v *mappingValue) Set(s string) error {
	if _, err := auth.ParsePrincipalMapping(s); err != nil {
		return err
	}
	*v = mappingValue(s)
	return nil
}
