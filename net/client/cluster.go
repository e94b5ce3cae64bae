package client

import (
	"context"
	"maps"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Broker is one node of the cluster as advertised in Metadata.
type Broker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
}

// ClusterInfo describes the cluster.
type ClusterInfo struct {
	// ID is the cluster ID, "" if the broker does not report one.
	ID string `json:"id"`
	// Controller is the controller's node ID, -1 if unknown.
	Controller int32 `json:"controller"`
	// Brokers is sorted by ID.
	Brokers []Broker `json:"brokers"`
}

// Cluster returns the cluster ID, controller and brokers.
func (c *Client) Cluster(ctx context.Context) (ClusterInfo, error) {
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return ClusterInfo{}, wrap("describe cluster", "", err)
	}
	defer cancel()
	m, err := c.adm.BrokerMetadata(ctx)
	if err != nil {
		return ClusterInfo{}, wrap("describe cluster", "", err)
	}
	return ClusterInfo{ID: m.Cluster, Controller: m.Controller, Brokers: brokersOf(m.Brokers)}, nil
}

// brokersOf converts Metadata's brokers, sorted by ID.
func brokersOf(bs kadm.BrokerDetails) []Broker {
	var out []Broker
	for _, b := range bs {
		br := Broker{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		out = append(out, br)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Brokers returns the cluster's brokers sorted by ID.
func (c *Client) Brokers(ctx context.Context) ([]Broker, error) {
	info, err := c.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	return info.Brokers, nil
}

// ClusterHealth is the cluster seen through Metadata: its brokers, the
// ones named as replicas but not listed (down: fenced or unreachable), and
// how its partitions stand.
type ClusterHealth struct {
	ClusterInfo
	// Down are broker ids that host replicas but are not in Metadata's
	// broker list, sorted.
	Down []int32 `json:"down"`
	// Partitions counts every partition, internal topics included;
	// UnderReplicated those whose ISR is smaller than their replica set;
	// Offline those without a leader (or whose leader's replica cannot
	// serve).
	Partitions      int `json:"partitions"`
	UnderReplicated int `json:"under_replicated"`
	Offline         int `json:"offline"`
	// Leaders and Replicas count, per broker id, the partitions it leads
	// and the replicas it hosts.
	Leaders  map[int32]int `json:"leaders"`
	Replicas map[int32]int `json:"replicas"`
}

// Health returns the brokers and the state of every partition, from one
// Metadata request.
func (c *Client) Health(ctx context.Context) (ClusterHealth, error) {
	const op = "describe cluster"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return ClusterHealth{}, wrap(op, "", err)
	}
	defer cancel()
	m, err := c.adm.Metadata(ctx)
	if err != nil {
		return ClusterHealth{}, wrap(op, "", err)
	}
	return healthOf(m), nil
}

func healthOf(m kadm.Metadata) ClusterHealth {
	h := ClusterHealth{
		ClusterInfo: ClusterInfo{ID: m.Cluster, Controller: m.Controller, Brokers: brokersOf(m.Brokers)},
		Leaders:     map[int32]int{}, Replicas: map[int32]int{},
	}
	live := map[int32]bool{}
	for _, b := range h.Brokers {
		live[b.ID] = true
	}
	down := map[int32]bool{}
	for _, td := range m.Topics {
		if td.Err != nil {
			continue
		}
		for _, pd := range td.Partitions {
			h.Partitions++
			if pd.Leader < 0 || slices.Contains(pd.OfflineReplicas, pd.Leader) {
				h.Offline++
			} else {
				h.Leaders[pd.Leader]++
			}
			if len(pd.ISR) < len(pd.Replicas) {
				h.UnderReplicated++
			}
			for _, r := range pd.Replicas {
				h.Replicas[r]++
				if !live[r] {
					down[r] = true
				}
			}
		}
	}
	h.Down = slices.Sorted(maps.Keys(down))
	return h
}
