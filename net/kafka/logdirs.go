package kafka

import (
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/net/protoext"
)

// DescribeLogDirs reports the one data directory and the size of every
// partition in it; tools use it for per-topic sizes. From v2 (flexible)
// each partition also carries MoonMQ's storage state in a tagged field
// (protoext.PartitionHealthTag) that stock clients skip: offline, and
// damaged ranges of an online partition. Offline partitions are listed
// with size -1.
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
		}
		t := &dir.Topics[len(dir.Topics)-1]
		t.Partitions = append(t.Partitions, dp)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}
