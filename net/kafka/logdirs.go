package kafka

import (
	"math"
	"path/filepath"
	"syscall"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/net/protoext"
)

// DescribeLogDirs reports the one data directory and the size of every
// partition in it; tools use it for per-topic sizes. From v2 (flexible)
// each partition also carries MoonMQ's storage state in a tagged field
// (protoext.PartitionHealthTag) that stock clients skip: offline, and
// damaged ranges of an online partition; and a partition of a compacted
// topic the log cleaner has looked at carries its compaction state in
// another (protoext.PartitionCompactionTag): dirty ratio, last cleaning,
// why it is uncleanable. Offline partitions are listed with size -1.
func (c *conn) handleDescribeLogDirs(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !c.authz(r).cluster(acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code // v3+; older versions see no directories
		return resp, nil
	}
	want := map[string]map[int32]bool{} // nil Topics: every partition
	for _, t := range req.Topics {
		ps := map[int32]bool{}
		for _, p := range t.Partitions {
			ps[p] = true
		}
		want[t.Topic] = ps
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, _ = filepath.Abs(c.s.broker.DataDir())
	var fs syscall.Statfs_t
	if syscall.Statfs(dir.Dir, &fs) == nil {
		dir.TotalBytes = int64(fs.Blocks) * int64(fs.Bsize)
		dir.UsableBytes = int64(fs.Bavail) * int64(fs.Bsize)
	}
	var compaction map[cleaner.TopicPartition]cleaner.PartitionStats
	if req.IsFlexible() && c.s.opts.Cleaner != nil {
		stats := c.s.opts.Cleaner.PartitionStats()
		compaction = make(map[cleaner.TopicPartition]cleaner.PartitionStats, len(stats))
		for _, cs := range stats {
			compaction[cs.TopicPartition] = cs
		}
	}
	for _, ps := range c.s.broker.PartitionStates() { // sorted by topic, partition
		if req.Topics != nil && !want[ps.Topic][ps.Partition] {
			continue
		}
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != ps.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = ps.Topic
			dir.Topics = append(dir.Topics, t)
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition, dp.Size = ps.Partition, ps.Stats.Size
		if ps.Stats.Segments == 0 {
			dp.Size = -1 // never opened
		}
		if req.IsFlexible() {
			h := protoext.PartitionHealth{Offline: !ps.Online, Error: ps.Error}
			for _, cr := range ps.CorruptRanges {
				h.Corrupt = append(h.Corrupt, protoext.CorruptRange{FromOffset: cr.FromOffset, ToOffset: cr.ToOffset, Reason: cr.Reason})
			}
			dp.UnknownTags.Set(protoext.PartitionHealthTag, h.Append(nil))
			if cs, ok := compaction[cleaner.TopicPartition{Topic: ps.Topic, Partition: ps.Partition}]; ok {
				dp.UnknownTags.Set(protoext.PartitionCompactionTag, compactionState(cs).Append(nil))
			}
		}
		t := &dir.Topics[len(dir.Topics)-1]
		t.Partitions = append(t.Partitions, dp)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}

// cutUTF8 cuts s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// compactionState is the wire form of the cleaner's view of a partition.
// The ratio is clamped to [0, 1], the range the tag promises (a parser
// refuses anything else).
func compactionState(cs cleaner.PartitionStats) protoext.PartitionCompaction {
	pc := protoext.PartitionCompaction{
		DirtyRatio: min(max(cs.DirtyRatio, 0), 1), DirtyBytes: max(cs.DirtyBytes, 0),
		CompactionDelayMs: max(cs.CompactionDelay.Milliseconds(), 0), Cleanings: max(cs.Cleanings, 0),
		LastCleanedMs: -1, LastDurationMs: max(cs.LastDuration.Milliseconds(), 0),
		Cleaning: cs.Cleaning, Uncleanable: cutUTF8(cs.Uncleanable, protoext.MaxUncleanable),
	}
	if !cs.LastCleaned.IsZero() {
		pc.LastCleanedMs = max(cs.LastCleaned.UnixMilli(), 0)
	}
	if math.IsNaN(cs.DirtyRatio) {
		pc.DirtyRatio = 0
	}
	return pc
}
