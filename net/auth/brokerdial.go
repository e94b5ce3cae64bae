package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/moonmq/moonmq/net/protoext"
)

// BrokerDialer connects this broker to another broker's Kafka listener
// the way that listener expects its clients: TCP, then TLS when TLS is
// set (presenting this node's certificate, so an mTLS listener knows the
// broker), then a SASL exchange when Mechanism is set. The connection it
// returns is authenticated and ready for Kafka requests, so the
// broker-to-broker clients (follower fetch, markers, verifications) need
// not know about security at all.
type BrokerDialer struct {
	// DialTLS connects over TLS (the node's TLS.Dial: its certificate as
	// the client certificate, the peer verified against the CA, following
	// reloads); nil: plain TCP.
	DialTLS func(ctx context.Context, addr string) (net.Conn, error)
	// Mechanism is the SASL mechanism (SCRAM-SHA-256, SCRAM-SHA-512 or
	// PLAIN); empty: no SASL.
	Mechanism      string
	User, Password string
	// Timeout bounds the dial and the whole handshake (default 10s).
	Timeout time.Duration
	// ClientID names this broker in the SASL requests (logs of the peer).
	ClientID string
}

// maxSaslFrame bounds a SASL response a peer may make this node read.
const maxSaslFrame = 1 << 20

// Dial connects to addr.
func (d *BrokerDialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := d.DialTLS
	if dial == nil {
		var nd net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return nd.DialContext(ctx, "tcp", addr) }
	}
	nc, err := dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("auth: dial broker %s: %w", addr, err)
	}
	deadline, _ := ctx.Deadline()
	if err := nc.SetDeadline(deadline); err != nil {
		nc.Close()
		return nil, err
	}
	if d.Mechanism != "" {
		if err := d.authenticate(ctx, nc, addr); err != nil {
			nc.Close()
			return nil, fmt.Errorf("auth: SASL %s with broker %s: %w", d.Mechanism, addr, err)
		}
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

func (d *BrokerDialer) mechanism() (sasl.Mechanism, error) {
	switch d.Mechanism {
	case "SCRAM-SHA-256":
		return scram.Auth{User: d.User, Pass: d.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: d.User, Pass: d.Password}.AsSha512Mechanism(), nil
	case "PLAIN":
		return plain.Auth{User: d.User, Pass: d.Password}.AsMechanism(), nil
	}
	return nil, fmt.Errorf("unsupported inter-broker mechanism %q (want SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN)", d.Mechanism)
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate v1 rounds on nc
// (KIP-152), as a Kafka client does.
func (d *BrokerDialer) authenticate(ctx context.Context, nc net.Conn, addr string) error {
	mech, err := d.mechanism()
	if err != nil {
		return err
	}
	var corr int32
	roundTrip := func(req kmsg.Request, resp kmsg.Response) error {
		corr++
		return protoext.RoundTrip(nc, d.ClientID, corr, req, resp, maxSaslFrame)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = d.Mechanism
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(hs, hsResp); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("handshake: %w (the broker offers %v)", err, hsResp.SupportedMechanisms)
	}
	session, msg, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	for round := 0; ; round++ {
		if round > 16 {
			return errors.New("too many SASL rounds")
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return err
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		msg = next
	}
}
