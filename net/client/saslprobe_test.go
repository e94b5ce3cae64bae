package client

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaLikeSASL answers every connection's SaslHandshake as Kafka does for a
// mechanism it lacks: UNSUPPORTED_SASL_MECHANISM with the list, then it
// closes the connection.
func kafkaLikeSASL(t *testing.T, offered ...string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var hdr [4]byte
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
				if _, err := io.ReadFull(c, body); err != nil || len(body) < 8 {
					return
				}
				resp := kmsg.NewPtrSASLHandshakeResponse()
				resp.Version = 1
				resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
				resp.SupportedMechanisms = offered
				out := binary.BigEndian.AppendUint32(make([]byte, 4), binary.BigEndian.Uint32(body[4:8]))
				out = resp.AppendTo(out)
				binary.BigEndian.PutUint32(out, uint32(len(out)-4))
				_, _ = c.Write(out)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestProbeOffers(t *testing.T) {
	var d net.Dialer
	dial := d.DialContext
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	offered, ok := probeOffers(ctx, []string{kafkaLikeSASL(t, "SCRAM-SHA-256", "SCRAM-SHA-512")}, dial, MechScramSHA256Plus)
	require.True(t, ok)
	require.False(t, offered, "a Kafka without channel binding")

	offered, ok = probeOffers(ctx, []string{"127.0.0.1:1", kafkaLikeSASL(t, "SCRAM-SHA-256-PLUS", "SCRAM-SHA-256")}, dial, MechScramSHA256Plus)
	require.True(t, ok, "the second seed answers")
	require.True(t, offered)

	_, ok = probeOffers(ctx, []string{"127.0.0.1:1"}, dial, MechScramSHA256Plus)
	require.False(t, ok, "no seed answered")
}

// TestMechanismsAfterProbe: SCRAM over TLS lists -PLUS first unless a
// mechanism is named or the probe found the broker lacks it.
func TestMechanismsAfterProbe(t *testing.T) {
	s := Security{TLS: true, User: "u", Password: "p"}
	names := func(s Security) []string {
		var out []string
		for _, m := range s.mechanisms(&peerCerts{}) {
			out = append(out, m.Name())
		}
		return out
	}
	require.Equal(t, []string{"SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"}, names(s))
	s.noPlus = true
	require.Equal(t, []string{"SCRAM-SHA-256"}, names(s))
	s.noPlus, s.Mechanism = false, "SCRAM-SHA-512"
	require.Equal(t, []string{"SCRAM-SHA-512"}, names(s))
	s.Mechanism = "SCRAM-SHA-512-PLUS"
	require.Equal(t, []string{"SCRAM-SHA-512-PLUS"}, names(s))
}
