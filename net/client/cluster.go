package client

import (
	"context"
	"sort"
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
	info := ClusterInfo{ID: m.Cluster, Controller: m.Controller}
	for _, b := range m.Brokers {
		br := Broker{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		info.Brokers = append(info.Brokers, br)
	}
	sort.Slice(info.Brokers, func(i, j int) bool { return info.Brokers[i].ID < info.Brokers[j].ID })
	return info, nil
}

// Brokers returns the cluster's brokers sorted by ID.
func (c *Client) Brokers(ctx context.Context) ([]Broker, error) {
	info, err := c.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	return info.Brokers, nil
}
