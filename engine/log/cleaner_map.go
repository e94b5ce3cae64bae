package log

import (
	"hash/maphash"
	"sync"
)

// offsetMaps keeps the last map released, so a cleaner calling Clean log
// after log does not allocate and zero its whole budget every time (Kafka
// allocates one map per cleaner thread).
var offsetMaps sync.Pool

// getOffsetMap returns an empty map of the size memory gives.
func getOffsetMap(memory int) *offsetMap {
	if m, ok := offsetMaps.Get().(*offsetMap); ok && len(m.slots) == mapSlots(memory) {
		return m
	}
	return newOffsetMap(memory)
}

// putOffsetMap clears m and keeps it for the next cleaning.
func putOffsetMap(m *offsetMap, yield func()) {
	m.clear(yield)
	offsetMaps.Put(m)
}

// mapSlots is the largest power of two of slots that fits memory (at
// least 16).
func mapSlots(memory int) int {
	n := 16
	for n*2*mapSlotSize <= memory {
		n *= 2
	}
	return n
}

// offsetMap is the cleaner's key -> latest offset map (Kafka's
// SkimpyOffsetMap): a fixed open-addressing table sized once from the memory
// budget, never grown, so a log with more keys than fit is cleaned in
// several passes instead of allocating more. Keys are stored as a 128-bit
// hash (two independent 64-bit seeds), as Kafka stores an MD5: a collision
// would make one key's record shadow another's, which at 2^-128 per pair is
// far below the odds of a disk error.
type offsetMap struct {
	slots   []mapSlot
	mask    uint64
	used    int
	maxUsed int // load factor bound: probing stays short
	seed1   maphash.Seed
	seed2   maphash.Seed
}

// mapSlot is one entry; off is the offset plus one so the zero slot is empty.
type mapSlot struct {
	h1, h2 uint64
	off    int64
}

// mapSlotSize is the memory one slot takes, for the budget.
const mapSlotSize = 24

// mapLoadFactor is Kafka's log.cleaner.io.buffer.load.factor default.
const mapLoadFactor = 0.9

// newOffsetMap sizes the table from memory bytes (mapSlots).
func newOffsetMap(memory int) *offsetMap {
	n := mapSlots(memory)
	return &offsetMap{
		slots:   make([]mapSlot, n),
		mask:    uint64(n - 1),
		maxUsed: int(float64(n) * mapLoadFactor),
		seed1:   maphash.MakeSeed(),
		seed2:   maphash.MakeSeed(),
	}
}

// capacity is how many distinct keys the map holds at most.
func (m *offsetMap) capacity() int { return m.maxUsed }

func (m *offsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)
}

// find returns the slot of key's hash: its entry, or the empty slot where it
// would go.
func (m *offsetMap) find(h1, h2 uint64) *mapSlot {
	i := h1 & m.mask
	for {
		s := &m.slots[i]
		if s.off == 0 || (s.h1 == h1 && s.h2 == h2) {
			return s
		}
		i = (i + 1) & m.mask
	}
}

// put records offset as key's latest. It returns false, changing nothing,
// when the key is new and the map is full.
func (m *offsetMap) put(key []byte, offset int64) bool {
	h1, h2 := m.hash(key)
	s := m.find(h1, h2)
	if s.off == 0 {
		if m.used >= m.maxUsed {
			return false
		}
		m.used++
		s.h1, s.h2 = h1, h2
	}
	if offset+1 > s.off {
		s.off = offset + 1
	}
	return true
}

// get returns key's latest offset, if the map has it.
func (m *offsetMap) get(key []byte) (int64, bool) {
	h1, h2 := m.hash(key)
	s := m.find(h1, h2)
	if s.off == 0 {
		return 0, false
	}
	return s.off - 1, true
}

// clearChunk is how many slots clear zeroes between yields: the default
// map is 100 MB, which one clear would take 10 to 20 ms to zero without a
// pause (it is not preemptible).
const clearChunk = 1 << 16

// clear empties the map for the next pass, keeping its memory, calling
// yield between chunks. An empty map (used 0: every slot is zero) is left
// as it is: a pooled map was cleared when it was put back.
func (m *offsetMap) clear(yield func()) {
	if m.used == 0 {
		return
	}
	for i := 0; i < len(m.slots); i += clearChunk {
		clear(m.slots[i:min(i+clearChunk, len(m.slots))])
		yield()
	}
	m.used = 0
}
