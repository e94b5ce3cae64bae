package protoext

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"fmt"
	"hash"
)

// TLSServerEndPoint is RFC 5929's tls-server-end-point channel-binding data
// of SCRAM-SHA-x-PLUS (an extension MoonMQ adds to Kafka's SASL): the hash
// of the server's certificate (DER) with the hash function of its
// signature algorithm, SHA-256 when that is MD5 or SHA-1. The broker
// (net/auth) and the toolkit (net/client) must compute the same bytes. A
// certificate whose signature uses no single hash (Ed25519) has no such
// binding: an error.
func TLSServerEndPoint(cert *x509.Certificate) ([]byte, error) {
	var h hash.Hash
	switch cert.SignatureAlgorithm {
	case x509.MD5WithRSA, x509.SHA1WithRSA, x509.DSAWithSHA1, x509.ECDSAWithSHA1,
		x509.SHA256WithRSA, x509.SHA256WithRSAPSS, x509.DSAWithSHA256, x509.ECDSAWithSHA256:
		h = sha256.New()
	case x509.SHA384WithRSA, x509.SHA384WithRSAPSS, x509.ECDSAWithSHA384:
		h = sha512.New384()
	case x509.SHA512WithRSA, x509.SHA512WithRSAPSS, x509.ECDSAWithSHA512:
		h = sha512.New()
	default:
		return nil, fmt.Errorf("certificate %q is signed with %v, for which tls-server-end-point defines no hash",
			cert.Subject.CommonName, cert.SignatureAlgorithm)
	}
	h.Write(cert.Raw)
	return h.Sum(nil), nil
}
