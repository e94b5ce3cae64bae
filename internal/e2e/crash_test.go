package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/testbroker"
)

type ack struct {
	partition int32
	offset    int64
}

// TestSIGKILLLosesNothingAcknowledged kills a real broker with SIGKILL in
// the middle of an acks=all produce load, three times, restarting it on the
// same data each time; afterwards every acknowledged record must be
// readable exactly once, at the offset it was acknowledged with, and the
// partitions must hold dense offsets with no duplicate values.
func TestSIGKILLLosesNothingAcknowledged(t *testing.T) {
	b := testbroker.Start(t)
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "crash", 4, map[string]*string{"segment.bytes": kadm.StringPtr("65536")})

	var (
		mu    sync.Mutex
		acked = map[string]ack{}
		seq   int
	)
	for round := 0; round < 3; round++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("crash"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(5*time.Second))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var ackedThisRound int
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					mu.Lock()
					seq++
					v := fmt.Sprintf("r%d-%d", round, seq)
					mu.Unlock()
					cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
						if err == nil {
							mu.Lock()
							acked[string(r.Value)] = ack{r.Partition, r.Offset}
							ackedThisRound++
							mu.Unlock()
						}
					})
				}
			}()
		}
		testbroker.WaitFor(t, 30*time.Second, "acknowledged writes before the kill", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return ackedThisRound > 2000
		})
		b.Kill()
		cancel()
		wg.Wait()
		cl.Close() // fails whatever is still buffered; those were never acknowledged
		b.Restart()
	}

	mu.Lock()
	want := len(acked)
	mu.Unlock()
	require.Greater(t, want, 6000)

	// Read every partition to its end.
	_, adm = newClient(t, b.Addr)
	ctx := ctxT(t, 60*time.Second)
	ends, err := adm.ListEndOffsets(ctx, "crash")
	require.NoError(t, err)
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	recs := consumeAll(t, b.Addr, "crash", int(total))

	got := map[string]ack{}
	next := map[int32]int64{}
	for _, r := range recs {
		_, dup := got[string(r.Value)]
		require.False(t, dup, "record %s stored twice", r.Value)
		got[string(r.Value)] = ack{r.Partition, r.Offset}
		require.Equal(t, next[r.Partition], r.Offset, "dense offsets in partition %d", r.Partition)
		next[r.Partition]++
	}
	for v, a := range acked {
		g, ok := got[v]
		require.True(t, ok, "acknowledged record %s (partition %d offset %d) lost", v, a.partition, a.offset)
		require.Equal(t, a, g, "acknowledged record %s moved", v)
	}
	t.Logf("%d acknowledged records across 3 SIGKILLs, all present; %d stored in total", want, len(recs))
}
