package group

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Key versions of __consumer_offsets records, as Kafka writes them: the
// first int16 of a key says what the record is.
const (
	offsetCommitKeyVersion  = 1
	groupMetadataKeyVersion = 2
)

// offsetValueVersion is the OffsetCommitValue version written: v4 (Kafka
// 4.1) carries the topic id, so offsets of a deleted topic are never
// resurrected for a new topic of the same name.
const offsetValueVersion = 4

func encodeOffsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func encodeGroupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func encodeOffsetValue(o *offsetEntry) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.offset, o.leaderEpoch, o.metadata, o.commitTime
	v.TopicID = o.topicID
	v.Version = offsetValueVersion
	if o.expireTime >= 0 {
		// Only v1 stores an explicit expiry (OffsetCommit v1-v4
		// retention); it predates leader epochs.
		v.Version = 1
		v.ExpireTimestamp = o.expireTime
	}
	return v.AppendTo(nil)
}

// record is one decoded __consumer_offsets record.
type record struct {
	group     string
	topic     string // offset records only
	partition int32
	offset    *offsetEntry             // nil: tombstone
	metadata  *kmsg.GroupMetadataValue // group records; nil: tombstone
	isGroup   bool
}

// decodeRecord parses a record's key and value. ok is false for records of
// kinds MoonMQ does not use (e.g. KIP-848 records written by Kafka), which
// replay skips.
func decodeRecord(key, value []byte) (r record, ok bool, err error) {
	if len(key) < 2 {
		return r, false, fmt.Errorf("key of %d bytes", len(key))
	}
	switch v := int16(binary.BigEndian.Uint16(key)); v {
	case 0, offsetCommitKeyVersion:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return r, false, fmt.Errorf("offset commit key: %w", err)
		}
		r.group, r.topic, r.partition = k.Group, k.Topic, k.Partition
		if value == nil {
			return r, true, nil
		}
		var ov kmsg.OffsetCommitValue
		if err := ov.ReadFrom(value); err != nil {
			return r, false, fmt.Errorf("offset commit value for %s/%s/%d: %w", k.Group, k.Topic, k.Partition, err)
		}
		r.offset = &offsetEntry{offset: ov.Offset, leaderEpoch: -1, metadata: ov.Metadata,
			commitTime: ov.CommitTimestamp, expireTime: -1, topicID: ov.TopicID}
		if ov.Version >= 3 {
			r.offset.leaderEpoch = ov.LeaderEpoch
		}
		if ov.Version == 1 {
			r.offset.expireTime = ov.ExpireTimestamp
		}
		return r, true, nil
	case groupMetadataKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return r, false, fmt.Errorf("group metadata key: %w", err)
		}
		r.group, r.isGroup = k.Group, true
		if value == nil {
			return r, true, nil
		}
		gv := kmsg.NewGroupMetadataValue()
		if err := gv.ReadFrom(value); err != nil {
			return r, false, fmt.Errorf("group metadata value for %s: %w", k.Group, err)
		}
		r.metadata = &gv
		return r, true, nil
	default:
		return r, false, nil
	}
}
