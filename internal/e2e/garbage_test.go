package e2e

import (
	"encoding/binary"
	"io"
	"math/rand"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/testbroker"
)

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return c
}

// frame builds a request: size, key, version, correlation id, client id, body.
func frame(key, version int16, corr int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func readResponse(t *testing.T, c net.Conn) (corr int32, body []byte) {
	t.Helper()
	var size [4]byte
	_, err := io.ReadFull(c, size[:])
	require.NoError(t, err)
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	return int32(binary.BigEndian.Uint32(buf)), buf[4:]
}

// expectClosed waits for the server to close the connection.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_, err := io.ReadAll(c)
	require.NoError(t, err, "server should close the connection (EOF), not time out")
}

func TestGarbageOnThePort(t *testing.T) {
	b := testbroker.Start(t)

	// An oversized frame.
	c := dial(t, b.Addr)
	_, err := c.Write([]byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3})
	require.NoError(t, err)
	expectClosed(t, c)

	// Random bytes, many times.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 50; i++ {
		c := dial(t, b.Addr)
		junk := make([]byte, 8+rng.Intn(200))
		rng.Read(junk)
		binary.BigEndian.PutUint32(junk, uint32(len(junk)-4))
		_, _ = c.Write(junk)
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = io.ReadAll(c) // answered or closed; either way the broker lives
		c.Close()
	}

	// A truncated Metadata body closes the connection.
	c = dial(t, b.Addr)
	_, err = c.Write(frame(3, 9, 7, []byte{0x05}))
	require.NoError(t, err)
	expectClosed(t, c)

	// An unknown API key is answered UNSUPPORTED_VERSION, and the connection
	// keeps serving.
	c = dial(t, b.Addr)
	_, err = c.Write(frame(999, 0, 42, nil))
	require.NoError(t, err)
	corr, body := readResponse(t, c)
	require.Equal(t, int32(42), corr)
	require.Equal(t, int16(35), int16(binary.BigEndian.Uint16(body)))

	// ApiVersions at a version from the future gets the v0 answer with our versions.
	_, err = c.Write(frame(18, 99, 43, nil))
	require.NoError(t, err)
	corr, body = readResponse(t, c)
	require.Equal(t, int32(43), corr)
	r := kbin.Reader{Src: body}
	require.Equal(t, int16(35), r.Int16())
	require.Greater(t, r.ArrayLen(), int32(5))

	require.Contains(t, b.Log(), "closing connection")

	// A real client still works.
	cl, adm := newClient(t, b.Addr, kgo.DefaultProduceTopic("after"))
	createTopic(t, adm, "after", 1, nil)
	require.NoError(t, cl.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Value: []byte("ok")}).FirstErr())
}
