package replica

import (
	"testing"
	"time"

	"github.com/moonmq/moonmq/engine/clock"
)

// BenchmarkPartitionAppend is the produce path of one partition (validation,
// dedup state, the log's page-cache write; no fsync wait): alone on its
// node, and as a replicated leader, which also registers its durability
// callback for the ISR.
func BenchmarkPartitionAppend(b *testing.B) {
	for _, replicated := range []bool{false, true} {
		name := "alone"
		if replicated {
			name = "leader"
		}
		b.Run(name, func(b *testing.B) {
			m, err := Open(Options{DataDir: b.TempDir(), Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000))})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			p, err := m.EnsurePartition(TopicPartition{Topic: "b", Partition: 0}, map[string]string{"flush.messages": "9223372036854775807"})
			if err != nil {
				b.Fatal(err)
			}
			if replicated {
				if err := p.BecomeLeader(1, &benchISR{}); err != nil {
					b.Fatal(err)
				}
			}
			rec := producerBatch(-1, -1, -1, string(make([]byte, 1024)))
			b.SetBytes(int64(len(rec)))
			b.ResetTimer()
			for range b.N {
				if _, err := p.Append(append([]byte(nil), rec...)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchISR is an ISR of the leader alone.
type benchISR struct{ end int64 }

func (s *benchISR) Appended(end int64) error                             { s.end = max(s.end, end); return nil }
func (s *benchISR) FollowerFetched(time.Time, int32, int64, int32) error { return nil }
func (s *benchISR) Tick(time.Time) error                                 { return nil }
func (s *benchISR) HighWatermark() int64                                 { return s.end }
func (s *benchISR) CanAppend() error                                     { return nil }
func (s *benchISR) Ready(end int64) (bool, error)                        { return s.end >= end, nil }
