package quota

import (
	"math"
	"testing"
	"time"
)

// FuzzManager builds quotas from arbitrary entities (as a peer's
// AlterClientQuotas could store them) and records arbitrary values at
// arbitrary times: nothing panics, throttles are never negative and
// request and connection throttles stay within a window.
func FuzzManager(f *testing.F) {
	f.Add("user", "alice", "client-id", "", ProducerByteRate, 100.0, "alice", "app", 5000.0, int64(0), int64(1500))
	f.Add("ip", "10.0.0.1", "", "", ConnectionCreationRate, 1.0, "", "", 1.0, int64(-5), int64(3))
	f.Add("client-id", "", "user", "", RequestPercentage, 0.0, "", "x", 1e300, int64(math.MaxInt32), int64(0))
	f.Add("group", "g", "ip", "", ConsumerByteRate, -1.0, "u", "", math.NaN(), int64(1), int64(-1))
	f.Fuzz(func(t *testing.T, type1, name1, type2, name2, key string, v float64, user, client string, value float64, at1, at2 int64) {
		var parts []Part
		for _, p := range [][2]string{{type1, name1}, {type2, name2}} {
			if p[0] == "" {
				continue
			}
			part := Part{Type: p[0]}
			if p[1] != "" {
				n := p[1]
				part.Name = &n
			}
			parts = append(parts, part)
		}
		m := New(Options{MaxSensors: 4})
		_ = m.Sync(1, func() []Entry { return []Entry{{Entity: parts, Values: map[string]float64{key: v}}} })
		for _, at := range []int64{at1, at2} {
			now := t0.Add(time.Duration(at) * time.Millisecond)
			for k := range numKinds {
				d := m.Record(k, user, client, value, now)
				if d < 0 || (k == Request && d > time.Second) {
					t.Fatalf("%v throttle %v", k, d)
				}
				m.Unrecord(k, user, client, value, now)
				_, _ = m.MaxValueInWindow(k, user, client)
			}
			if d := m.RecordConnection(name1, now); d < 0 || d > time.Second {
				t.Fatalf("connection throttle %v", d)
			}
		}
	})
}
