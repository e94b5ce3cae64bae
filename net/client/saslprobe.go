package client

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/net/protoext"
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
	resp := kmsg.NewPtrSASLHandshakeResponse()
	if err := protoext.RoundTrip(nc, DefaultClientID, 1, req, resp, 1<<16); err != nil {
		return nil, err
	}
	return resp.SupportedMechanisms, nil
}

// probeTimeout bounds the probe: a broker that does not answer it is
// then asked with both mechanisms, as without a probe.
const probeTimeout = 5 * time.Second
