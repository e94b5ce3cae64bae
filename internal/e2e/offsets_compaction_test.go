package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/moonmq/moonmq/internal/testbroker"
)

// __consumer_offsets is compacted: a real `moonmq serve` keeps it, and the
// replay a restart does, bounded by the live keys (plus the active segment
// of each partition, which is never cleaned), however many commits were
// made.

// offsetsPartition is one __consumer_offsets partition in /stats.
type offsetsPartition struct {
	Partition  int32 `json:"partition"`
	SizeBytes  int64 `json:"size_bytes"`
	Segments   int   `json:"segments"`
	State      string
	Corrupt    []any `json:"corrupt_ranges"`
	Compaction *struct {
		DirtyRatio float64 `json:"dirty_ratio"`
		Cleanings  int64   `json:"cleanings"`
		Cleaning   bool    `json:"cleaning"`
		BytesRead  int64   `json:"bytes_read"`
	} `json:"compaction"`
}

// offsetsTopicStats returns __consumer_offsets' partitions from /stats.
func offsetsTopicStats(t testing.TB, httpAddr string) []offsetsPartition {
	t.Helper()
	code, body := httpGet(t, "http://"+httpAddr+"/stats")
	require.Equal(t, http.StatusOK, code, body)
	var st struct {
		Topics []struct {
			Name       string             `json:"name"`
			Partitions []offsetsPartition `json:"partitions"`
		} `json:"topics"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	for _, tp := range st.Topics {
		if tp.Name == "__consumer_offsets" {
			return tp.Partitions
		}
	}
	return nil
}

func offsetsSize(parts []offsetsPartition) (size int64) {
	for _, p := range parts {
		size += p.SizeBytes
	}
	return size
}

// waitCleaned waits until the cleaner has nothing left to do on
// __consumer_offsets: every partition cleaned at least once, none being
// cleaned, none dirtier than min.cleanable.dirty.ratio (0.5).
func waitCleaned(t *testing.T, httpAddr string) []offsetsPartition {
	t.Helper()
	var parts []offsetsPartition
	testbroker.WaitFor(t, 90*time.Second, "the cleaner to catch up with __consumer_offsets", func() bool {
		parts = offsetsTopicStats(t, httpAddr)
		if len(parts) == 0 {
			return false
		}
		for _, p := range parts {
			if c := p.Compaction; c == nil || c.Cleanings == 0 || c.Cleaning || c.DirtyRatio >= 0.5 {
				return false
			}
		}
		return true
	})
	return parts
}

// commitRounds commits, rounds times, an offset for every partition of
// topic in every group (one OffsetCommit per group and round, writers in
// parallel); the offset of round r is r. It returns the last round
// acknowledged per group, stopping a group's writer at its first failure
// when tolerant (the broker may be killed under it), failing the test
// otherwise.
func commitRounds(t *testing.T, adm *kadm.Client, topic string, groups []string, partitions int32, from, rounds int, tolerant bool, stop <-chan struct{}) map[string]int {
	t.Helper()
	var (
		mu    sync.Mutex
		acked = map[string]int{}
		wg    sync.WaitGroup
	)
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := from; r < from+rounds; r++ {
				select {
				case <-stop:
					return
				default:
				}
				var os kadm.Offsets
				for p := range partitions {
					os.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(r), LeaderEpoch: -1, Metadata: fmt.Sprintf("r%d", r)})
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := adm.CommitOffsets(ctx, g, os)
				cancel()
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					if !tolerant {
						t.Errorf("commit of round %d for %s: %v", r, g, err)
					}
					return
				}
				mu.Lock()
				acked[g] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

// coordinatorLoad is the last "coordinator loaded" line of the broker's
// log for __consumer_offsets: what the replay at start read.
func coordinatorLoad(t *testing.T, log string) (records, bytes int64) {
	t.Helper()
	found := false
	for _, rec := range logLines(t, log) {
		if rec["msg"] == "coordinator loaded" && rec["topic"] == "__consumer_offsets" {
			records, bytes, found = int64(rec["records"].(float64)), int64(rec["bytes"].(float64)), true
		}
	}
	require.True(t, found, "no coordinator loaded line for __consumer_offsets")
	return records, bytes
}

// restartTimed stops the broker gracefully and starts it again, and
// returns how long the start took until /readyz answered 200 (the group
// coordinator replayed __consumer_offsets).
func restartTimed(t *testing.T, b *testbroker.Broker) time.Duration {
	t.Helper()
	require.NoError(t, b.Stop())
	start := time.Now()
	b.Restart()
	testbroker.WaitFor(t, 60*time.Second, "/readyz", func() bool {
		code, _ := httpGet(t, "http://"+b.HTTPAddr+"/readyz")
		return code == http.StatusOK
	})
	return time.Since(start)
}

// The test: after many commits of the same keys, the size of
// __consumer_offsets and what a restart replays stop growing: after N and
// after 3N rounds of commits they stay within a bound set by the segment
// size and the live keys, while the cleaner reads many times that bound.
// (The restart times are logged, not asserted: tests never assert timings;
// what a replay reads is what its time grows with.)
func TestOffsetsTopicStopsGrowing(t *testing.T) {
	const (
		segment    = 64 << 10
		partitions = 2 // of __consumer_offsets
		topicParts = 10
		rounds     = 300
	)
	b := testbroker.Start(t, "--offsets-topic-partitions", fmt.Sprint(partitions),
		"--offsets-topic-segment-bytes", fmt.Sprint(segment), "--log-cleaner-backoff", "100ms")
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "consumed", topicParts, nil)
	var groups []string
	for i := range 20 {
		groups = append(groups, fmt.Sprintf("group-%02d", i))
	}

	// What compaction must stay within: per partition the active segment
	// (up to one segment), a sealed one not worth cleaning yet, and the
	// cleaned latest records of the keys (200 keys of about 100 bytes).
	const bound = partitions*2*segment + 64<<10

	measure := func(total int) (size, replayed int64, took time.Duration) {
		parts := waitCleaned(t, b.HTTPAddr)
		size = offsetsSize(parts)
		took = restartTimed(t, b)
		_, replayed = coordinatorLoad(t, b.Log())
		t.Logf("after %d rounds (%d commits): __consumer_offsets %d bytes in %d+%d segments, restart replayed %d bytes, ready in %v",
			total, total*len(groups)*topicParts, size, parts[0].Segments, parts[1].Segments, replayed, took)
		return size, replayed, took
	}

	acked := commitRounds(t, adm, "consumed", groups, topicParts, 0, rounds, false, nil)
	require.Len(t, acked, len(groups))
	size1, replayed1, _ := measure(rounds)
	_, adm = newClient(t, b.Addr)
	acked = commitRounds(t, adm, "consumed", groups, topicParts, rounds, 2*rounds, false, nil)
	require.Len(t, acked, len(groups))
	parts := offsetsTopicStats(t, b.HTTPAddr)
	var written int64
	for _, p := range parts {
		written += p.Compaction.BytesRead // this process's cleanings alone
	}
	size3, replayed3, _ := measure(3 * rounds)

	for _, v := range []int64{size1, replayed1, size3, replayed3} {
		require.Less(t, v, int64(bound), "__consumer_offsets grows with the commits")
	}
	require.Greater(t, written, int64(5*bound), "the cleaner read far more than it kept")

	// And what is left is the latest commit of every key.
	_, adm = newClient(t, b.Addr)
	for _, g := range groups {
		fetched, err := adm.FetchOffsets(ctxT(t, 10*time.Second), g)
		require.NoError(t, err)
		for p := range int32(topicParts) {
			o, ok := fetched.Lookup("consumed", p)
			require.True(t, ok, "%s partition %d", g, p)
			require.EqualValues(t, 3*rounds-1, o.At, "%s partition %d", g, p)
			require.Equal(t, fmt.Sprintf("r%d", 3*rounds-1), o.Metadata)
		}
	}
}

// A SIGKILL while __consumer_offsets is being cleaned loses no committed
// offset: writers commit increasing offsets for their groups while the
// cleaner (slowed down by its I/O limit, so cleanings last) rewrites the
// segments; the node is killed at a random moment of a cleaning, several
// times; after each restart every group's offsets are at least its last
// acknowledged commit, and the partitions are whole.
func TestOffsetsSurviveSIGKILLDuringCleaning(t *testing.T) {
	const topicParts = 4
	b := testbroker.Start(t, "--offsets-topic-partitions", "2", "--offsets-topic-segment-bytes", "16384",
		"--log-cleaner-backoff", "20ms", "--log-cleaner-io-max-bytes-per-second", "300000")
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "consumed", topicParts, nil)
	var groups []string
	for i := range 8 {
		groups = append(groups, fmt.Sprintf("kill-%d", i))
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	next := 0 // the next round to commit
	acked := map[string]int{}
	killedCleaning := 0
	for kill := range 5 {
		_, adm = newClient(t, b.Addr)
		stop := make(chan struct{})
		done := make(chan map[string]int, 1)
		go func() { done <- commitRounds(t, adm, "consumed", groups, topicParts, next, 1<<30, true, stop) }()
		// Kill once a cleaning of __consumer_offsets runs, at a random
		// moment of it.
		testbroker.WaitFor(t, 60*time.Second, "a cleaning of __consumer_offsets", func() bool {
			for _, p := range offsetsTopicStats(t, b.HTTPAddr) {
				if p.Compaction != nil && p.Compaction.Cleaning {
					return true
				}
			}
			return false
		})
		time.Sleep(time.Duration(rnd.IntN(300)) * time.Millisecond) // where in the cleaning the kill lands
		for _, p := range offsetsTopicStats(t, b.HTTPAddr) {
			if p.Compaction != nil && p.Compaction.Cleaning {
				killedCleaning++
				break
			}
		}
		b.Kill()
		close(stop)
		round := <-done
		for g, r := range round {
			acked[g] = r
			next = max(next, r+1)
		}
		next += 2 // past whatever was in flight, acknowledged or not
		b.Restart()

		_, adm = newClient(t, b.Addr)
		for _, g := range groups {
			var fetched kadm.OffsetResponses
			testbroker.WaitFor(t, 30*time.Second, "offsets readable after the restart", func() bool {
				var err error
				fetched, err = adm.FetchOffsets(ctxT(t, 5*time.Second), g)
				return err == nil && fetched.Error() == nil
			})
			want, ok := acked[g]
			if !ok {
				continue // nothing acknowledged yet
			}
			for p := range int32(topicParts) {
				o, ok := fetched.Lookup("consumed", p)
				require.True(t, ok, "kill %d: %s partition %d lost its offset", kill, g, p)
				require.GreaterOrEqual(t, o.At, int64(want), "kill %d: %s partition %d lost an acknowledged commit", kill, g, p)
				require.Equal(t, fmt.Sprintf("r%d", o.At), o.Metadata)
			}
		}
		for _, p := range offsetsTopicStats(t, b.HTTPAddr) {
			require.Equal(t, "online", p.State, "partition %d", p.Partition)
			require.Empty(t, p.Corrupt, "partition %d", p.Partition)
		}
	}
	require.NotContains(t, b.Log(), "skipped undecodable records")
	require.Positive(t, killedCleaning, "no kill landed during a cleaning")
	t.Logf("%d kills, %d during a cleaning; %d rounds committed", 5, killedCleaning, next)
}
