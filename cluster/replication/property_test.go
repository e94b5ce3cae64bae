package replication

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProperties drives a Leader with random appends, fetches (some hostile),
// ticks, controller answers and leader changes, and checks the invariants
// of the package comment after every step. The runs must reach the states
// the invariants are about (an advancing high watermark, ISR changes
// pending), or the checks would hold vacuously.
func TestProperties(t *testing.T) {
	var advances, pendings int
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		a, p := checkRun(t, seed, rng)
		advances += a
		pendings += p
	}
	require.NotZero(t, advances, "no run advanced the high watermark")
	require.NotZero(t, pendings, "no run had an ISR change pending")
}

// checkRun runs one random sequence and returns how many steps advanced
// the high watermark and how many ended with an ISR change pending.
func checkRun(t *testing.T, seed uint64, rng *rand.Rand) (advances, pendings int) {
	now := time.Unix(1_000_000, 0)
	l := New(1, 30*time.Second)
	epoch, pepoch := int32(1), int32(0)
	require.NoError(t, l.Become(now, LeaderState{Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2, 3, 4},
		LeaderEpoch: epoch, MinISR: 2}))
	// ends tracks each follower's real durable end: a follower never reports
	// more than the leader had, and reports a smaller end only after a
	// truncation, which this model does not make.
	ends := map[int32]int64{}
	for step := range 400 {
		hwBefore := l.HighWatermark()
		switch rng.IntN(7) {
		case 0:
			require.NoError(t, l.Appended(l.LogEnd()+rng.Int64N(5)))
		case 1, 2:
			r := int32(2 + rng.IntN(3))
			off := ends[r] + rng.Int64N(l.LogEnd()-ends[r]+1)
			require.NoError(t, l.FollowerFetched(now, r, off, epoch), "seed %d step %d", seed, step)
			ends[r] = off
		case 3:
			now = now.Add(time.Duration(rng.IntN(20)) * time.Second)
			require.NoError(t, l.Tick(now))
		case 4:
			if p, ok := l.Pending(); ok {
				r := Result{Accepted: rng.IntN(3) > 0, LeaderEpoch: epoch}
				if r.Accepted {
					pepoch++
					r.ISR, r.PartitionEpoch = p.ISR, pepoch
				}
				require.NoError(t, l.AlterPartitionResult(r))
			}
		case 5: // hostile input is refused and changes nothing
			before := l.State()
			pendingBefore, _ := l.Pending()
			require.Error(t, l.FollowerFetched(now, int32(rng.IntN(3)+5), 0, epoch))
			require.Error(t, l.FollowerFetched(now, 2, 0, epoch+1+rng.Int32N(3)))
			require.Error(t, l.FollowerFetched(now, 2, 0, epoch-1-rng.Int32N(3)))
			require.Error(t, l.FollowerFetched(now, 2, l.LogEnd()+1, epoch))
			require.Equal(t, before, l.State())
			pendingAfter, _ := l.Pending()
			require.Equal(t, pendingBefore, pendingAfter)
		case 6:
			if rng.IntN(10) == 0 { // leader change: a new epoch over the committed ISR
				epoch++
				pepoch++
				s := l.State()
				s.LeaderEpoch, s.PartitionEpoch = epoch, pepoch
				require.NoError(t, l.Become(now, s))
			}
		}
		hw := l.HighWatermark()
		require.GreaterOrEqual(t, hw, hwBefore, "seed %d step %d: HW went back", seed, step)
		require.LessOrEqual(t, hw, l.LogEnd(), "seed %d step %d", seed, step)
		if hw > hwBefore {
			advances++
			for _, id := range l.MaximalISR() {
				if id != 1 {
					require.LessOrEqual(t, hw, ends[id], "seed %d step %d: HW past member %d", seed, step, id)
				}
			}
		}
		require.Contains(t, l.State().ISR, int32(1), "seed %d step %d", seed, step)
		require.Contains(t, l.MaximalISR(), int32(1), "seed %d step %d", seed, step)
		if p, ok := l.Pending(); ok {
			pendings++
			require.Contains(t, p.ISR, int32(1), "seed %d step %d", seed, step)
			if !p.Shrink {
				for _, id := range p.ISR {
					if !slices.Contains(l.State().ISR, id) {
						require.GreaterOrEqual(t, ends[id], hw, "seed %d step %d: joiner %d behind the HW", seed, step, id)
					}
				}
			}
		}
	}
	return advances, pendings
}
