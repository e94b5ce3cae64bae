package replica

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/vfs"
)

// topicIDFile records, in a partition directory, the id of the topic it
// belongs to, in Kafka's partition.metadata format.
const topicIDFile = "partition.metadata"

// maxTopicIDFile bounds what is read of it (a real one is ~45 bytes).
const maxTopicIDFile = 4096

func encodeTopicIDFile(id TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n")
}

func decodeTopicIDFile(b []byte) (TopicID, error) {
	var id TopicID
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "version: 0" || !strings.HasPrefix(lines[1], "topic_id: ") {
		return id, fmt.Errorf("malformed %s", topicIDFile)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(lines[1], "topic_id: "))
	if err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("malformed topic id in %s", topicIDFile)
	}
	copy(id[:], raw)
	return id, nil
}

// claimDir makes dir the directory of the topic with id before its log is
// opened. A directory recording another id is an earlier topic of the same
// name whose delete this node never applied (it was down, or stopped
// before it got to it): the metadata says that topic is gone, so its data
// is removed rather than served as the new topic's. A directory recording
// no id (written by an older release) is adopted.
func (b *Manager) claimDir(tp TopicPartition, dir string, id TopicID) error {
	fsys := b.opts.FS
	v, err := vfs.ReadFile(fsys, filepath.Join(dir, topicIDFile), maxTopicIDFile)
	switch {
	case err == nil:
		have, derr := decodeTopicIDFile(v)
		if derr != nil {
			return fmt.Errorf("partition %s-%d: %w", tp.Topic, tp.Partition, derr)
		}
		if have == id {
			return nil
		}
		b.opts.Logger.Warn("removing the directory of a deleted topic of the same name",
			"topic", tp.Topic, "partition", tp.Partition, "dir", dir)
		if err := fsys.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove %s of a deleted topic: %w", dir, err)
		}
		if err := log.SyncDir(fsys, b.opts.DataDir); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read %s: %w", filepath.Join(dir, topicIDFile), err)
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := log.WriteFileAtomic(fsys, dir, topicIDFile, encodeTopicIDFile(id)); err != nil {
		return fmt.Errorf("record the topic id of %s: %w", dir, err)
	}
	return log.SyncDir(fsys, b.opts.DataDir) // dir may be new
}
