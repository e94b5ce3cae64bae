package node

import (
	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/net/kafka"
)

// AuthzConfig are a node's authorization (ACL) settings.
type AuthzConfig struct {
	// Enabled turns ACL checks on for the Kafka listener. It must be on
	// exactly when the listener authenticates its clients (SASL_PLAINTEXT,
	// SASL_SSL, or SSL with client certificates): package main derives it
	// from the security protocol (serveConfig.nodeConfig), embedders and
	// tests set it.
	Enabled bool
	// SuperUsers are principals allowed everything (--superusers).
	SuperUsers []string
	// AllowEveryoneIfNoACL allows operations on resources no ACL names
	// (--allow-everyone-if-no-acl-found).
	AllowEveryoneIfNoACL bool
	// ACLs, when set, is where the listener reads the bindings and their
	// version (tests); nil is the controller's, the cluster's ACLs as
	// CreateAcls and DeleteAcls change them through the metadata log.
	ACLs func() ([]acl.Binding, uint64)
}

// kafkaAuthz is the listener's authorization options, reading the
// controller's ACLs (an immutable shared slice and a version that changes
// with it) unless the configuration names another source.
func (c Config) kafkaAuthz(ctrl *controller.Controller) kafka.AuthzOptions {
	o := kafka.AuthzOptions{Enabled: c.Authz.Enabled, SuperUsers: c.Authz.SuperUsers,
		AllowEveryoneIfNoACL: c.Authz.AllowEveryoneIfNoACL, ACLs: c.Authz.ACLs}
	if o.ACLs == nil {
		o.ACLs = ctrl.ACLs
	}
	return o
}
