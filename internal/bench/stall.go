package bench

import (
	"sync"
	"time"
)

// Stall is the longest time one partition went without an acknowledgement
// between two acknowledgements during a produce run: with a steady --rate,
// the time a leader failover kept that partition from taking writes (from
// the last write the old leader acknowledged to the first the new one did).
type Stall struct {
	Seconds   float64   `json:"seconds"`
	Partition int32     `json:"partition"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
}

// stallTracker records per-partition acknowledgement gaps. It is safe for
// concurrent use (promises run on every producer's goroutines).
type stallTracker struct {
	mu      sync.Mutex
	lastAck map[int32]time.Time
	worst   Stall
}

func newStallTracker() *stallTracker { return &stallTracker{lastAck: map[int32]time.Time{}} }

// acked notes an acknowledgement of partition at now.
func (s *stallTracker) acked(partition int32, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.lastAck[partition]; ok {
		if gap := now.Sub(last); gap.Seconds() > s.worst.Seconds {
			s.worst = Stall{Seconds: gap.Seconds(), Partition: partition, From: last, To: now}
		}
	}
	if now.After(s.lastAck[partition]) {
		s.lastAck[partition] = now
	}
}

// longest is the worst gap seen, nil before any partition had two
// acknowledgements.
func (s *stallTracker) longest() *Stall {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worst.To.IsZero() {
		return nil
	}
	w := s.worst
	return &w
}
