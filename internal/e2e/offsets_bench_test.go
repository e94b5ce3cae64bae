package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/testbroker"
)

// The workload of BenchmarkOffsetsTopicRestart, set after -args:
//
//	go test ./internal/e2e -run '^$' -bench OffsetsTopicRestart -benchtime 1x -args \
//	    -offsets-groups 1000 -offsets-group-partitions 10 -offsets-rounds 300 -offsets-serve-flags '--offsets-topic-partitions 1'
var (
	benchGroups     = flag.Int("offsets-groups", 1000, "BenchmarkOffsetsTopicRestart: consumer groups committing")
	benchGroupParts = flag.Int("offsets-group-partitions", 10, "BenchmarkOffsetsTopicRestart: partitions each group commits an offset for")
	benchRounds     = flag.Int("offsets-rounds", 300, "BenchmarkOffsetsTopicRestart: commits of every group's partitions")
	benchWriters    = flag.Int("offsets-writers", 64, "BenchmarkOffsetsTopicRestart: OffsetCommit requests in flight")
	benchServeFlags = flag.String("offsets-serve-flags", "", "BenchmarkOffsetsTopicRestart: more moonmq serve flags, space-separated")
)

// BenchmarkOffsetsTopicRestart measures what compaction does to
// __consumer_offsets: a real `moonmq serve` takes -offsets-rounds commits
// of every partition of every group (one OffsetCommit per group and
// round), then, with the log cleaner (compaction) and with
// --log-cleaner-threads 0 (none), reports the topic's size once the
// cleaner has caught up, what the restart's replay read, and the time
// from the process start to /readyz 200 (the group coordinator has
// replayed the topic). Run it with -benchtime 1x.
func BenchmarkOffsetsTopicRestart(b *testing.B) {
	for _, mode := range []struct {
		name  string
		flags []string
	}{{"compaction", nil}, {"no-compaction", []string{"--log-cleaner-threads", "0"}}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				offsetsTopicRestart(b, mode.flags)
			}
		})
	}
}

func offsetsTopicRestart(b *testing.B, flags []string) {
	flags = append(flags, strings.Fields(*benchServeFlags)...)
	br := testbroker.Start(b, flags...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, int32(*benchGroupParts), 1, nil, "consumed"); err != nil {
		b.Fatal(err)
	}

	// Every writer takes the next (group, round) to commit; a group's
	// rounds go in order.
	var next, failed atomic.Int64
	total := int64(*benchGroups) * int64(*benchRounds)
	start := time.Now()
	var wg sync.WaitGroup
	for range *benchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				round, g := i/int64(*benchGroups), i%int64(*benchGroups)
				var os kadm.Offsets
				for p := range int32(*benchGroupParts) {
					os.Add(kadm.Offset{Topic: "consumed", Partition: p, At: round, LeaderEpoch: -1})
				}
				resp, err := adm.CommitOffsets(ctx, fmt.Sprintf("group-%05d", g), os)
				if err == nil {
					err = resp.Error()
				}
				if err != nil && failed.Add(1) == 1 {
					b.Errorf("commit: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	commitTime := time.Since(start)
	commits := total * int64(*benchGroupParts)

	// The cleaner has caught up when no partition is being cleaned or is
	// dirtier than min.cleanable.dirty.ratio.
	var size int64
	cleaning := !slices.Contains(flags, "--log-cleaner-threads")
	cleaned := time.Now()
	testbroker.WaitFor(b, 10*time.Minute, "the cleaner to catch up", func() bool {
		parts := offsetsTopicStats(b, br.HTTPAddr)
		size = offsetsSize(parts)
		for _, p := range parts {
			if c := p.Compaction; c != nil && (c.Cleaning || c.DirtyRatio >= 0.5) && cleaning {
				return false
			}
		}
		return true
	})
	cleanWait := time.Since(cleaned)

	if err := br.Stop(); err != nil {
		b.Fatal(err)
	}
	restart := time.Now()
	br.Restart()
	testbroker.WaitFor(b, 10*time.Minute, "/readyz", func() bool {
		resp, err := http.Get("http://" + br.HTTPAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	ready := time.Since(restart)

	var records, bytes float64
	var replay time.Duration
	for _, line := range strings.Split(br.Log(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "coordinator loaded" && rec["topic"] == "__consumer_offsets" {
			records, bytes = rec["records"].(float64), rec["bytes"].(float64)
			replay, _ = time.ParseDuration(rec["duration"].(string))
		}
	}
	b.ReportMetric(float64(commits)/commitTime.Seconds(), "commits/s")
	b.ReportMetric(float64(size)/1e6, "topic-MB")
	b.ReportMetric(bytes/1e6, "replayed-MB")
	b.ReportMetric(records, "replayed-records")
	b.ReportMetric(replay.Seconds(), "replay-s")
	b.ReportMetric(ready.Seconds(), "restart-s")
	b.Logf("%d commits in %v (%.0f/s); cleaner caught up %v later; __consumer_offsets %.1f MB; restart replayed %.0f records, %.1f MB in %v, ready in %v",
		commits, commitTime.Round(time.Millisecond), float64(commits)/commitTime.Seconds(), cleanWait.Round(time.Millisecond),
		float64(size)/1e6, records, bytes/1e6, replay, ready.Round(time.Millisecond))
}
