package metadata

// Delta is what one applied metadata log entry changed, in log order. A
// subscriber applies deltas in the order it receives them; after applying
// one it has reconciled up to Index.
type Delta struct {
	// Index is the log index of the entry (for a snapshot delta: the last
	// index the image includes).
	Index uint64
	// Snapshot marks a full image instead of a change: Changes then hold a
	// TopicCreated per topic (with every partition), then a BrokerRegistered
	// per broker, and the subscriber must drop whatever it holds that the
	// image does not name. A subscription starts with one, and gets another
	// after the state is replaced (a Raft snapshot restore) or when it fell
	// so far behind that its pending changes were folded into one.
	Snapshot bool
	// Changes are the entry's typed changes, in the order of its records.
	// An entry that changed nothing a subscriber acts on (a producer id
	// block, a rejected command) has none, but is still delivered so the
	// subscriber's reconciled index advances.
	Changes []Change
}

// Change is one typed change: *TopicCreated, *PartitionChanged,
// *ConfigsChanged, *TopicDeleted or *BrokerRegistered.
type Change interface{ isChange() }

// TopicCreated: a new topic, with all its partitions and config overrides
// as they are at the end of the entry (the PartitionChanged and
// ConfigsChanged of the same entry are not repeated for it).
type TopicCreated struct{ Topic Topic }

// PartitionChanged: a partition was added to an existing topic, or its
// replicas, ISR, leader or leader epoch changed. Configs are the topic's
// overrides, which a replica is opened with.
type PartitionChanged struct {
	Topic     string
	TopicID   [16]byte
	Partition Partition
	Configs   map[string]string
	// Added is set for a new partition of an existing topic.
	Added bool
}

// ConfigsChanged: a topic's config overrides changed; Configs is the whole
// set after the entry.
type ConfigsChanged struct {
	Topic   string
	Configs map[string]string
}

// TopicDeleted: the topic, as it was, is gone.
type TopicDeleted struct{ Topic Topic }

// BrokerRegistered: a broker registered or changed its registration.
type BrokerRegistered struct{ Broker Broker }

func (*TopicCreated) isChange()     {}
func (*PartitionChanged) isChange() {}
func (*ConfigsChanged) isChange()   {}
func (*TopicDeleted) isChange()     {}
func (*BrokerRegistered) isChange() {}
