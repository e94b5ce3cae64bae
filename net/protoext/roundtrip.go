package protoext

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RoundTrip writes req with a v1 request header (non-flexible versions
// only: what the SASL handshake of a connection speaks before any client
// library takes it over) and reads its response into resp, reading
// nothing past it, and no response larger than maxResponse bytes. It is
// how the broker-to-broker dialer (net/auth) and the toolkit's SASL probe
// (net/client) talk on a raw connection.
func RoundTrip(rw io.ReadWriter, clientID string, corr int32, req kmsg.Request, resp kmsg.Response, maxResponse int32) error {
	name := kmsg.NameForKey(req.Key())
	if req.IsFlexible() {
		return fmt.Errorf("%s v%d is flexible; only non-flexible versions are spoken here", name, req.GetVersion())
	}
	buf := make([]byte, 4, 64)
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(clientID)))
	buf = append(buf, clientID...)
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := rw.Write(buf); err != nil {
		return err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(rw, hdr[:]); err != nil {
		return fmt.Errorf("reading the %s response: %w", name, err)
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > maxResponse {
		return fmt.Errorf("%s response of %d bytes", name, size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return fmt.Errorf("%s response correlation id %d, want %d", name, got, corr)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(rw, body); err != nil {
		return fmt.Errorf("reading the %s response: %w", name, err)
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body)
}
