package kafka

import (
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs reports the one data directory and the size of every
// partition in it; tools use it for per-topic sizes.
func (c *conn) handleDescribeLogDirs(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
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
	for _, p := range c.s.broker.Partitions() { // sorted by topic, partition
		tp := p.TopicPartition()
		if req.Topics != nil && !want[tp.Topic][tp.Partition] {
			continue
		}
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = tp.Topic
			dir.Topics = append(dir.Topics, t)
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition, dp.Size = tp.Partition, p.Log().Size()
		t := &dir.Topics[len(dir.Topics)-1]
		t.Partitions = append(t.Partitions, dp)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}
