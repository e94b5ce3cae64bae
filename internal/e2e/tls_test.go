package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testbroker"
	"github.com/moonmq/moonmq/internal/testcerts"
)

// TestKcatOverTLS drives librdkafka over SSL with a client certificate
// (mTLS) against a real `moonmq serve`, then rotates the broker's
// certificate with SIGHUP: kcat keeps working, a new handshake sees the
// new certificate, and a bad file leaves the last good one in use.
func TestKcatOverTLS(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not installed (make deps installs it)")
	}
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "e2e ca")
	server := ca.Server(t, "broker")
	certFile, keyFile := server.Write(t, dir, "server")
	caFile := ca.Write(t, dir, "ca")
	client := ca.Client(t, pkix.Name{CommonName: "kcat"})
	clientCert, clientKey := client.Write(t, dir, "client")

	b := testbroker.Start(t, "--auto-create-topics", "--security-protocol", "SSL",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile, "--superusers", "User:kcat")
	ssl := []string{"-b", b.Addr, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + caFile,
		"-X", "ssl.certificate.location=" + clientCert, "-X", "ssl.key.location=" + clientKey}
	kcat := func(stdin string, args ...string) string {
		return testbroker.Kcat(t, stdin, append(append([]string(nil), ssl...), args...)...)
	}

	kcat("k1:one\nk2:two\n", "-P", "-t", "secure", "-K:", "-X", "acks=all")
	require.Equal(t, "0 k1=one\n1 k2=two\n", kcat("", "-C", "-t", "secure", "-o", "beginning", "-e", "-f", "%o %k=%s\n"))
	require.Contains(t, b.Log(), `"principal":"User:kcat"`, "the certificate's CN is the principal")

	// Refused: no client certificate; a plaintext client.
	_, err := tryKcat("-b", b.Addr, "-X", "security.protocol=SSL", "-X", "ssl.ca.location="+caFile, "-L", "-m", "3")
	require.Error(t, err)
	_, err = tryKcat("-b", b.Addr, "-L", "-m", "3")
	require.Error(t, err)

	serial := func() string {
		c, err := tls.Dial("tcp", b.Addr, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS(t)}})
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	require.Equal(t, server.Cert.SerialNumber.String(), serial())

	// Rotate: SIGHUP re-reads the files.
	next := ca.Server(t, "broker")
	next.Write(t, dir, "server")
	require.NoError(t, b.Signal(syscall.SIGHUP))
	testbroker.WaitFor(t, 10*time.Second, "the reload to be logged", func() bool {
		return strings.Contains(b.Log(), `"serial":"`+next.Cert.SerialNumber.String()+`"`)
	})
	require.Equal(t, next.Cert.SerialNumber.String(), serial())
	kcat("k3:three\n", "-P", "-t", "secure", "-K:")

	// A bad key: logged, the rotated certificate stays.
	testcerts.WriteFile(t, keyFile, []byte("not a key"))
	require.NoError(t, b.Signal(syscall.SIGHUP))
	testbroker.WaitFor(t, 10*time.Second, "the failed reload to be logged", func() bool {
		return strings.Contains(b.Log(), "TLS reload failed")
	})
	require.Equal(t, next.Cert.SerialNumber.String(), serial())
	require.Equal(t, "0 k1=one\n1 k2=two\n2 k3=three\n", kcat("", "-C", "-t", "secure", "-o", "beginning", "-e", "-f", "%o %k=%s\n"))
}

// tryKcat runs kcat and returns its error instead of failing the test.
func tryKcat(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
