package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// probeOffers reports whether the broker at one of seeds offers the SASL
// mechanism want, asking with a SaslHandshake v1 on a connection of its
// own (dial: the TLS dialer), closed afterwards. It is how the toolkit
// decides to use SCRAM-SHA-x-PLUS: Kafka closes a connection whose
// SaslHandshake names a mechanism it does not offer, so franz-go's fallback
// to the next mechanism on the same connection works on MoonMQ only. ok is
// false when no seed answered (the caller keeps its default).
func probeOffers(ctx context.Context, seeds []string, dial func(context.Context, string, string) (net.Conn, error), want string) (offered, ok bool) {
	for _, addr := range seeds {
		mechs, err := saslMechanisms(ctx, addr, dial, want)
		if err == nil {
			return slices.Contains(mechs, want), true
		}
	}
	return false, false
}

// saslMechanisms sends SaslHandshake v1 for mech to addr and returns the
// mechanisms the answer lists.
func saslMechanisms(ctx context.Context, addr string, dial func(context.Context, string, string) (net.Conn, error), mech string) ([]string, error) {
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 1
	req.Mechanism = mech
	const corr = 1
	buf := make([]byte, 4, 64)
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Version))
	buf = binary.BigEndian.AppendUint32(buf, corr)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(DefaultClientID)))
	buf = append(buf, DefaultClientID...)
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := nc.Write(buf); err != nil {
		return nil, err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > 1<<16 || binary.BigEndian.Uint32(hdr[4:]) != corr {
		return nil, fmt.Errorf("unexpected SaslHandshake response from %s", addr)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, err
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp.SupportedMechanisms, nil
}

// probeTimeout bounds the probe: a broker that does not answer it is
// then asked with both mechanisms, as without a probe.
const probeTimeout = 5 * time.Second
