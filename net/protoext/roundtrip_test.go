package protoext

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rw replies with a canned response and records what was written.
type rw struct {
	bytes.Buffer // the reply, read by RoundTrip
	written      bytes.Buffer
}

func (c *rw) Write(p []byte) (int, error) { return c.written.Write(p) }

func reply(corr int32, body []byte) *rw {
	c := &rw{}
	_ = binary.Write(&c.Buffer, binary.BigEndian, int32(4+len(body)))
	_ = binary.Write(&c.Buffer, binary.BigEndian, corr)
	c.Buffer.Write(body)
	return c
}

func TestRoundTrip(t *testing.T) {
	want := kmsg.NewPtrSASLHandshakeResponse()
	want.Version = 1
	want.SupportedMechanisms = []string{"SCRAM-SHA-256"}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, "PLAIN"

	c := reply(7, want.AppendTo(nil))
	got := kmsg.NewPtrSASLHandshakeResponse()
	require.NoError(t, RoundTrip(c, "me", 7, req, got, 1<<10))
	require.Equal(t, want.SupportedMechanisms, got.SupportedMechanisms)
	// The request as a broker reads it: size, key 17, version 1, corr 7, client id.
	w := c.written.Bytes()
	require.EqualValues(t, len(w)-4, binary.BigEndian.Uint32(w))
	require.EqualValues(t, 17, binary.BigEndian.Uint16(w[4:]))
	require.EqualValues(t, 7, binary.BigEndian.Uint32(w[8:]))

	require.ErrorContains(t, RoundTrip(reply(8, want.AppendTo(nil)), "me", 7, req, got, 1<<10), "correlation id 8")
	require.ErrorContains(t, RoundTrip(reply(7, make([]byte, 2000)), "me", 7, req, got, 1<<10), "response of 2004 bytes")
	flex := kmsg.NewPtrSASLAuthenticateRequest()
	flex.Version = 2
	require.ErrorContains(t, RoundTrip(reply(7, nil), "me", 7, flex, kmsg.NewPtrSASLAuthenticateResponse(), 1<<10), "flexible")
}
