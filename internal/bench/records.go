package bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The records a produce run sends. Without --keys they are keyless, with a
// random value (a slice of a shared random payload, at a per-record offset,
// so consecutive records differ). With --keys N every record has a key out
// of a space of N: the fixed-width decimal of an index in [0, N) (width
// len(N-1), so "0042" of 10,000), which keeps every key the same size and
// sorts them in index order. --key-order random draws the index uniformly
// for each record (each producer its own xorshift stream); sequential takes
// them round-robin from one counter shared by the producers (record i of
// the run gets key i mod N, so a run of k*N records writes every key
// exactly k times: a compacted topic's live size and dirty share are then
// known). The key decides the partition (kgo hashes it, as Kafka's
// producers do), so a key's versions always land on the same partition, as
// compaction needs. --tombstones F sends a fraction F of the records with
// a null value: a tombstone, which deletes its key on a compacted topic.

// Key orders of --key-order.
const (
	keyOrderRandom     = "random"
	keyOrderSequential = "sequential"
)

// keySpace hands out the keys of a --keys run; it is shared by the
// producers of the run (the sequential counter).
type keySpace struct {
	n          int64
	width      int
	sequential bool
	counter    atomic.Int64
}

// newKeySpace returns the key space of n keys (nil when n is 0: keyless).
func newKeySpace(n int64, order string) *keySpace {
	if n <= 0 {
		return nil
	}
	return &keySpace{n: n, width: len(strconv.FormatInt(n-1, 10)), sequential: order == keyOrderSequential}
}

// format returns the key of index i.
func (k *keySpace) format(i int64) []byte {
	key := make([]byte, k.width)
	for j := k.width - 1; j >= 0; j-- {
		key[j] = '0' + byte(i%10)
		i /= 10
	}
	return key
}

// recordGen makes the records of one producer. It is used by one goroutine.
type recordGen struct {
	size       int
	payload    []byte
	keys       *keySpace // nil: keyless
	tombstones uint64    // a record is a tombstone when its draw is below this (of 2^53)
	rng        uint64    // xorshift state, never zero
}

// newRecordGen returns the generator of producer i of the run.
func newRecordGen(cfg *ProduceConfig, payload []byte, keys *keySpace, i int) *recordGen {
	return &recordGen{
		size: cfg.Size, payload: payload, keys: keys,
		tombstones: uint64(cfg.Tombstones * (1 << 53)),
		rng:        uint64(i)*0x9E3779B97F4A7C15 + 1,
	}
}

// draw advances the xorshift stream: cheap enough for every record.
func (g *recordGen) draw() uint64 {
	g.rng ^= g.rng << 13
	g.rng ^= g.rng >> 7
	g.rng ^= g.rng << 17
	return g.rng
}

// next returns the next record (its timestamp is the caller's).
func (g *recordGen) next() *kgo.Record {
	r := &kgo.Record{}
	if g.keys != nil {
		var idx int64
		if g.keys.sequential {
			idx = (g.keys.counter.Add(1) - 1) % g.keys.n
		} else {
			idx = int64(g.draw() % uint64(g.keys.n))
		}
		r.Key = g.keys.format(idx)
		if g.tombstones > 0 && g.draw()>>11 < g.tombstones {
			return r // a tombstone: no value at all (nil, not empty)
		}
	}
	off := int(g.draw() % payloadSpread)
	r.Value = g.payload[off : off+g.size]
	return r
}

// topicConfigs is --topic-config: key=value pairs for the topic --create
// makes, given as repeated flags or comma lists. A comma-separated piece
// without '=' continues the previous value, so a list value needs no
// quoting: "cleanup.policy=compact,delete,segment.bytes=1048576" is
// cleanup.policy=compact,delete and segment.bytes=1048576.
type topicConfigs map[string]string

func (c *topicConfigs) String() string {
	if c == nil || len(*c) == 0 {
		return ""
	}
	keys := make([]string, 0, len(*c))
	for k := range *c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + (*c)[k])
	}
	return b.String()
}

// Set adds the pairs of one --topic-config.
func (c *topicConfigs) Set(s string) error {
	if *c == nil {
		*c = topicConfigs{}
	}
	last := ""
	for piece := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(piece, "=")
		if !ok {
			if last == "" {
				return errors.New("want key=value (or a comma list of them)")
			}
			(*c)[last] += "," + piece
			continue
		}
		k = strings.TrimSpace(k)
		if k == "" {
			return errors.New("empty config name before '='")
		}
		if _, dup := (*c)[k]; dup {
			return fmt.Errorf("%s is given twice", k)
		}
		(*c)[k] = v
		last = k
	}
	return nil
}
