package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// Limits enforced by both the proposer and the FSM (and
// metadata.MaxPartitions).
const (
	// MaxTopicNameLen is Kafka's limit (249: a partition directory name
	// "<topic>-<partition>" must fit in 255 bytes).
	MaxTopicNameLen = 249
	// MaxProducerIDBlock bounds one AllocateProducerIDs call.
	MaxProducerIDBlock = 1_000_000
)

// InternalTopicConfigs are the settings an internal topic must keep: its
// records are state (committed offsets, transactions) that retention must
// never delete, so cleanup.policy stays compact. The group coordinator
// repairs a topic that lost them (an older release let clients create and
// alter these topics) when it loads.
var InternalTopicConfigs = map[string]string{"cleanup.policy": "compact"}

// checkInternalTopic refuses changes that would make an internal topic
// lose data.
func checkInternalTopic(t *metadata.Topic) error {
	if !t.Internal && !metadata.IsInternalTopic(t.Name) {
		return nil
	}
	for k, want := range InternalTopicConfigs {
		if got := t.Configs[k]; got != want {
			return fmt.Errorf("%w: %s of internal topic %s must stay %q, not %q: retention would delete the state it holds",
				metadata.ErrInvalidConfig, k, t.Name, want, got)
		}
	}
	return nil
}

// ValidateTopicName applies Kafka's rules: 1..249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: name is empty", metadata.ErrInvalidTopicName)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed", metadata.ErrInvalidTopicName, name)
	case len(name) > MaxTopicNameLen:
		return fmt.Errorf("%w: name is %d characters, the limit is %d", metadata.ErrInvalidTopicName, len(name), MaxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return fmt.Errorf("%w: %q contains %q; use only ASCII letters, digits, '.', '_' and '-'", metadata.ErrInvalidTopicName, name, ch)
		}
	}
	return nil
}

// collisionKey maps names that Kafka considers colliding (they differ only
// in '.' versus '_', which metric names cannot tell apart) to one key.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// validatePartitions checks the structure of a replica assignment: every
// partition has rf distinct, non-negative replicas, a leader among them (or
// metadata.NoLeader: offline), an ISR that is a non-empty subset
// containing the leader, and offline replicas that are distinct replicas
// other than the leader.
func validatePartitions(ps []partitionAssignment, rf int) error {
	for i, p := range ps {
		if len(p.Replicas) == 0 || len(p.Replicas) != rf {
			return fmt.Errorf("%w: partition %d has %d replicas, want %d", metadata.ErrInvalidReplicationFactor, i, len(p.Replicas), rf)
		}
		for j, r := range p.Replicas {
			if r < 0 || slices.Contains(p.Replicas[:j], r) {
				return fmt.Errorf("%w: partition %d has invalid or duplicate replica %d", metadata.ErrInvalidRequest, i, r)
			}
		}
		if p.Leader != metadata.NoLeader && !slices.Contains(p.Replicas, p.Leader) {
			return fmt.Errorf("%w: partition %d leader %d is not a replica", metadata.ErrInvalidRequest, i, p.Leader)
		}
		if len(p.ISR) == 0 || (p.Leader != metadata.NoLeader && !slices.Contains(p.ISR, p.Leader)) {
			return fmt.Errorf("%w: partition %d ISR %v must contain the leader %d", metadata.ErrInvalidRequest, i, p.ISR, p.Leader)
		}
		for _, r := range p.ISR {
			if !slices.Contains(p.Replicas, r) {
				return fmt.Errorf("%w: partition %d ISR member %d is not a replica", metadata.ErrInvalidRequest, i, r)
			}
		}
		for j, r := range p.Offline {
			if !slices.Contains(p.Replicas, r) || slices.Contains(p.Offline[:j], r) {
				return fmt.Errorf("%w: partition %d offline replica %d is not a replica or listed twice", metadata.ErrInvalidRequest, i, r)
			}
			if r == p.Leader {
				return fmt.Errorf("%w: partition %d leader %d is offline", metadata.ErrInvalidRequest, i, r)
			}
		}
		if p.LeaderEpoch < 0 {
			return fmt.Errorf("%w: partition %d has negative leader epoch", metadata.ErrInvalidRequest, i)
		}
	}
	return nil
}

// validateConfigs checks a topic's full override set.
func validateConfigs(configs map[string]string) error {
	if err := topicconfig.Validate(configs); err != nil {
		return invalidConfig(err)
	}
	return nil
}

// applyConfigOps returns cur with ops applied, with Kafka's
// IncrementalAlterConfigs semantics: APPEND and SUBTRACT work on list keys
// only, starting from the override or, if none, the default; a key may
// appear once per request. The result is validated as a whole.
func applyConfigOps(cur map[string]string, ops []metadata.ConfigOp) (map[string]string, error) {
	out := make(map[string]string, len(cur)+len(ops))
	for k, v := range cur {
		out[k] = v
	}
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		def, ok := topicconfig.Lookup(op.Key)
		if !ok {
			return nil, invalidConfig(fmt.Errorf("%w: unknown key %q", topicconfig.ErrInvalid, op.Key))
		}
		if seen[op.Key] {
			return nil, invalidConfig(fmt.Errorf("%w: key %q appears more than once", topicconfig.ErrInvalid, op.Key))
		}
		seen[op.Key] = true
		switch op.Op {
		case metadata.OpSet:
			out[op.Key] = op.Value
		case metadata.OpDelete:
			delete(out, op.Key)
		case metadata.OpAppend, metadata.OpSubtract:
			if def.Kind != topicconfig.KindList {
				return nil, invalidConfig(fmt.Errorf("%w: %s is not a list; %s applies to list keys only", topicconfig.ErrInvalid, op.Key, op.Op))
			}
			base, ok := out[op.Key]
			if !ok {
				base = def.Default
			}
			items := splitList(base)
			for _, v := range splitList(op.Value) {
				if op.Op == metadata.OpAppend {
					if !slices.Contains(items, v) {
						items = append(items, v)
					}
				} else {
					items = slices.DeleteFunc(items, func(s string) bool { return s == v })
				}
			}
			out[op.Key] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: unknown config operation %d for %q", metadata.ErrInvalidRequest, op.Op, op.Key)
		}
	}
	if err := validateConfigs(out); err != nil {
		return nil, err
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
