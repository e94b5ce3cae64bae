package mql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/moonmq/moonmq/internal/syncbuf"
	"github.com/moonmq/moonmq/internal/testcerts"
	"github.com/moonmq/moonmq/net/client"
)

// newSecureHarness is a harness whose session starts with sec (as the
// command line's --user, --tls, ... give it).
func newSecureHarness(t *testing.T, addr string, sec client.Security) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	out, status := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	s := NewSession(Options{Addr: addr, Out: out, Status: status, Format: FormatJSON,
		RequestTimeout: 5 * time.Second, DialTimeout: 2 * time.Second, Security: sec})
	t.Cleanup(s.Close)
	return &harness{t: t, s: s, out: out, status: status, ctx: ctx}
}

// TestConnectWithUser: CONNECT ... USER ... PASSWORD [MECHANISM] logs in
// with SASL and says as whom; a user created in the session can then log
// in; a CONNECT without security clauses keeps the command line's
// settings; a mistyped CONNECT leaves the current connection alone.
func TestConnectWithUser(t *testing.T) {
	// bob is made by kfake: kfake's server-first message always says
	// i=4096, whatever a user was created with (CREATE USER uses 8192),
	// so a user created through AlterUserScramCredentials cannot log in
	// to kfake (net/client's TestSCRAMUserCreatedThenUsed uses 4096).
	addr := newFake(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "admin-pw"),
		kfake.Superuser("SCRAM-SHA-256", "bob", "bob-pw"))
	h := newHarness(t, addr) // no credentials
	require.Error(t, h.fail(`SHOW TOPICS;`))

	ack := h.ack(fmt.Sprintf(`CONNECT '%s' USER 'admin' PASSWORD 'admin-pw' MECHANISM 'scram-sha-512';`, addr))
	require.Contains(t, ack, "connected to "+addr+" (")
	require.Contains(t, ack, "1 broker) as User:admin")
	require.NotContains(t, ack, "admin-pw")
	require.Equal(t, "User:admin", h.s.Principal())
	h.exec(`CREATE TOPIC orders PARTITIONS 1; CREATE USER carol PASSWORD 'carol-pw';`)
	require.Contains(t, h.exec(`SHOW USERS;`), `"user":"carol"`)

	// bob: SCRAM-SHA-256 by default.
	require.Contains(t, h.ack(fmt.Sprintf(`CONNECT '%s' USER 'bob' PASSWORD 'bob-pw';`, addr)), "as User:bob")
	require.Len(t, rows(t, h.exec(`SHOW TOPICS;`)), 1)

	// Mistakes caught before the current connection is closed.
	err := h.fail(fmt.Sprintf(`CONNECT '%s' MECHANISM 'PLAIN';`, addr))
	require.ErrorContains(t, err, "CONNECT: USER: SASL mechanism PLAIN needs a user")
	err = h.fail(fmt.Sprintf(`CONNECT '%s' USER 'bob' PASSWORD 'x' MECHANISM 'GSSAPI';`, addr))
	require.ErrorContains(t, err, "MECHANISM: GSSAPI is not supported")
	err = h.fail(fmt.Sprintf(`CONNECT '%s' USER 'bob' PASSWORD 'x' TLS CA '/nonexistent/ca.pem';`, addr))
	require.ErrorContains(t, err, "CONNECT: CA: open /nonexistent/ca.pem")
	err = h.fail(fmt.Sprintf(`CONNECT '%s' USER 'bob' PASSWORD 'x' MECHANISM 'SCRAM-SHA-256-PLUS';`, addr))
	require.ErrorContains(t, err, "binds to the TLS channel: it needs TLS")
	require.Len(t, rows(t, h.exec(`SHOW TOPICS;`)), 1, "still connected as bob")

	// A wrong password fails and names no password.
	err = h.fail(fmt.Sprintf(`CONNECT '%s' USER 'bob' PASSWORD 'not-bobs';`, addr))
	require.NotContains(t, err.Error(), "not-bobs")

	// Command-line security, kept by a bare CONNECT.
	c := newSecureHarness(t, addr, client.Security{User: "admin", Password: "admin-pw", Mechanism: "SCRAM-SHA-512"})
	require.Len(t, rows(t, c.exec(`SHOW TOPICS;`)), 1)
	require.Contains(t, c.ack(fmt.Sprintf(`CONNECT '%s';`, addr)), "as User:admin")
	banner, err := c.s.Banner(c.ctx)
	require.NoError(t, err)
	require.Contains(t, banner, "connected to "+addr+" as User:admin — ")
}

// TestConnectTLS: CONNECT ... TLS CA 'file' verifies the broker with the
// CA; with a client certificate from the command line the principal is its
// CN; without the CA the error says what to pass.
func TestConnectTLS(t *testing.T) {
	pki := testcerts.NewPKI(t, "carol")
	addr := newFake(t, kfake.TLS(pki.ServerTLS(false)))
	h := newHarness(t, addr)
	ack := h.ack(fmt.Sprintf(`CONNECT '%s' TLS CA '%s';`, addr, pki.CAFile))
	require.Contains(t, ack, "connected to "+addr)
	require.NotContains(t, ack, " as ", "an anonymous connection says nothing of a principal")
	h.exec(`CREATE TOPIC t PARTITIONS 1;`)
	require.Len(t, rows(t, h.exec(`SHOW TOPICS;`)), 1)

	err := h.fail(fmt.Sprintf(`CONNECT '%s' TLS;`, addr))
	require.ErrorContains(t, err, "--tls-ca")

	maddr := newFake(t, kfake.TLS(pki.ServerTLS(true)))
	m := newSecureHarness(t, maddr, client.Security{TLSCAFile: pki.CAFile, TLSCertFile: pki.ClientCert, TLSKeyFile: pki.ClientKey})
	require.Contains(t, m.ack(fmt.Sprintf(`CONNECT '%s';`, maddr)), "as User:carol")
}

// TestSessionQuotas: SET QUOTA, SHOW QUOTAS and RESET QUOTA round-trip
// through AlterClientQuotas / DescribeClientQuotas.
func TestSessionQuotas(t *testing.T) {
	h := newHarness(t, newFake(t))
	require.Contains(t, h.ack(`SET QUOTA (producer_byte_rate = 1MiB, consumer_byte_rate = 2097152) FOR USER alice;`),
		"quota set for user 'alice': producer_byte_rate = 1048576, consumer_byte_rate = 2097152")
	require.Contains(t, h.ack(`SET QUOTA (request_percentage = '12.5') FOR USER alice CLIENT 'app';`),
		"quota set for user 'alice' with client id 'app': request_percentage = 12.5")
	require.Contains(t, h.ack(`SET QUOTA (producer_byte_rate = 1KiB) FOR CLIENT DEFAULT;`),
		"quota set for the default client id: producer_byte_rate = 1024")
	h.exec(`SET QUOTA (connection_creation_rate = 5) FOR IP '10.0.0.7';`)

	all := rows(t, h.exec(`SHOW QUOTAS;`))
	require.Equal(t, []map[string]any{
		{"user": nil, "client_id": "<default>", "ip": nil, "quota": "producer_byte_rate", "value": 1024.0},
		{"user": nil, "client_id": nil, "ip": "10.0.0.7", "quota": "connection_creation_rate", "value": 5.0},
		{"user": "alice", "client_id": nil, "ip": nil, "quota": "consumer_byte_rate", "value": 2097152.0},
		{"user": "alice", "client_id": nil, "ip": nil, "quota": "producer_byte_rate", "value": 1048576.0},
		{"user": "alice", "client_id": "app", "ip": nil, "quota": "request_percentage", "value": 12.5},
	}, all)

	alice := rows(t, h.exec(`SHOW QUOTAS FOR USER alice;`))
	require.Len(t, alice, 3, "%v", alice)

	require.Contains(t, h.ack(`RESET QUOTA (producer_byte_rate) FOR USER alice;`), "quota reset for user 'alice': producer_byte_rate")
	alice = rows(t, h.exec(`SHOW QUOTAS FOR USER alice;`))
	require.Len(t, alice, 2, "%v", alice)
	for _, r := range alice {
		require.NotEqual(t, "producer_byte_rate", r["quota"])
	}
}
