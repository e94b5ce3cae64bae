package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The fetcher speaks two requests to a leader, at fixed versions: Fetch v12
// (the highest this broker serves: ReplicaID as a top-level field, topic
// names, flexible) and OffsetForLeaderEpoch v4. Brokers of one cluster run
// one MoonMQ version, so there is no ApiVersions negotiation (Kafka pins
// inter-broker versions with inter.broker.protocol.version the same way).
const (
	fetchVersion        int16 = 12
	epochsVersion       int16 = 4
	responseHeaderBytes       = 4 // the correlation id; flexible headers add tags
)

// errMalformed: the leader's answer does not decode, or claims more than
// what was asked; the connection is dropped and re-dialled.
var errMalformed = errors.New("peer: malformed response")

// wireConn is one TCP connection to a leader's Kafka listener, used by one
// goroutine: a request is written, its answer read, in turn.
type wireConn struct {
	c        net.Conn
	fmt      *kmsg.RequestFormatter
	corr     int32
	wbuf     []byte
	rbuf     []byte
	maxFrame int
	timeout  time.Duration
}

func newWireConn(c net.Conn, clientID string, maxFrame int, timeout time.Duration) *wireConn {
	return &wireConn{c: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)), maxFrame: maxFrame, timeout: timeout}
}

func (w *wireConn) Close() error { return w.c.Close() }

// roundTrip sends req and decodes its answer into resp. The exchange is
// bounded by the connection's timeout and by ctx: cancelling ctx fails the
// socket calls at once. check, when set, vets the body before kmsg decodes
// it (bounding what decoding may allocate).
func (w *wireConn) roundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response, check func([]byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = w.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := w.c.SetDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	w.corr++
	w.wbuf = w.fmt.AppendRequest(w.wbuf[:0], req, w.corr)
	if _, err := w.c.Write(w.wbuf); err != nil {
		return ctxOr(ctx, fmt.Errorf("write %s: %w", kmsg.NameForKey(req.Key()), err))
	}
	frame, err := readFrame(w.c, w.rbuf[:0], w.maxFrame)
	if err != nil {
		return ctxOr(ctx, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err))
	}
	if cap(frame) <= 1<<20 {
		w.rbuf = frame // keep modest buffers; a huge one goes back to the collector
	}
	body, err := responseBody(frame, w.corr, resp.IsFlexible())
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(body); err != nil {
			return err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: %s: %v", errMalformed, kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

// ctxOr prefers the context's error: a socket error after a cancellation is
// the cancellation's doing.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readFrame reads one size-prefixed frame into buf (grown as needed),
// refusing sizes outside [responseHeaderBytes, max] before allocating.
func readFrame(r io.Reader, buf []byte, max int) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(size[:])))
	if n < responseHeaderBytes || n > int64(max) {
		return nil, fmt.Errorf("%w: frame of %d bytes, the limit is %d", errMalformed, n, max)
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// responseBody checks a response frame's correlation id and skips its
// header's tagged fields (flexible versions), returning the body.
func responseBody(frame []byte, corr int32, flexible bool) ([]byte, error) {
	r := kbin.Reader{Src: frame}
	if got := r.Int32(); !r.Ok() || got != corr {
		return nil, fmt.Errorf("%w: correlation id %d, expected %d", errMalformed, got, corr)
	}
	if flexible {
		skipTags(&r)
	}
	if !r.Ok() {
		return nil, fmt.Errorf("%w: truncated response header", errMalformed)
	}
	return r.Src, nil
}

// skipTags skips a tagged-field section (KIP-482): a count, then each
// field's tag, size and bytes. A count larger than the bytes left cannot
// be real and fails the reader.
func skipTags(r *kbin.Reader) {
	n := r.Uvarint()
	if int64(n) > int64(len(r.Src)) {
		r.Span(len(r.Src) + 1) // fails the reader
		return
	}
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint() // tag
		r.Span(int(r.Uvarint()))
	}
}

// checkFetchResponse walks a Fetch v12 response body without allocating
// and refuses one that names more topics or partitions than were asked
// (at most topics and partitions), so kmsg's decoding of it is bounded by
// the request, not by what the leader claims.
func checkFetchResponse(body []byte, topics, partitions int) error {
	r := kbin.Reader{Src: body}
	r.Int32() // throttle
	r.Int16() // error code
	r.Int32() // session id
	nt := compactLen(&r)
	if nt > topics {
		return fmt.Errorf("%w: fetch answer with %d topics for %d asked", errMalformed, nt, topics)
	}
	seen := 0
	for t := 0; t < nt && r.Ok(); t++ {
		r.Span(compactLen(&r)) // name
		np := compactLen(&r)
		if seen += np; seen > partitions {
			return fmt.Errorf("%w: fetch answer with more than the %d partitions asked", errMalformed, partitions)
		}
		for p := 0; p < np && r.Ok(); p++ {
			r.Int32()            // partition
			r.Int16()            // error code
			r.Int64()            // high watermark
			r.Int64()            // last stable offset
			r.Int64()            // log start offset
			na := compactLen(&r) // aborted transactions (nullable: 0 is null)
			if int64(na)*(8+8+1) > int64(len(r.Src)) {
				return fmt.Errorf("%w: %d aborted transactions in %d bytes", errMalformed, na, len(r.Src))
			}
			for a := 0; a < na && r.Ok(); a++ {
				r.Int64() // producer id
				r.Int64() // first offset
				skipTags(&r)
			}
			r.Int32()              // preferred read replica
			r.Span(compactLen(&r)) // records
			skipTags(&r)
		}
		skipTags(&r)
	}
	skipTags(&r)
	if !r.Ok() {
		return fmt.Errorf("%w: truncated fetch answer", errMalformed)
	}
	return nil
}

// checkEpochsResponse is checkFetchResponse for OffsetForLeaderEpoch v4.
func checkEpochsResponse(body []byte, topics, partitions int) error {
	r := kbin.Reader{Src: body}
	r.Int32() // throttle
	nt := compactLen(&r)
	if nt > topics {
		return fmt.Errorf("%w: OffsetForLeaderEpoch answer with %d topics for %d asked", errMalformed, nt, topics)
	}
	seen := 0
	for t := 0; t < nt && r.Ok(); t++ {
		r.Span(compactLen(&r)) // name
		np := compactLen(&r)
		if seen += np; seen > partitions {
			return fmt.Errorf("%w: OffsetForLeaderEpoch answer with more than the %d partitions asked", errMalformed, partitions)
		}
		for p := 0; p < np && r.Ok(); p++ {
			r.Int16() // error code
			r.Int32() // partition
			r.Int32() // leader epoch
			r.Int64() // end offset
			skipTags(&r)
		}
		skipTags(&r)
	}
	skipTags(&r)
	if !r.Ok() {
		return fmt.Errorf("%w: truncated OffsetForLeaderEpoch answer", errMalformed)
	}
	return nil
}

// compactLen reads a compact (length+1) array, string or bytes length; a
// null (0) is 0, and a length past the bytes left fails the reader.
func compactLen(r *kbin.Reader) int {
	n := int64(r.Uvarint()) - 1
	if n <= 0 {
		return 0
	}
	if n > int64(len(r.Src)) {
		r.Span(len(r.Src) + 1)
		return 0
	}
	return int(n)
}
