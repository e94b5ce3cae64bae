package client

import (
	"context"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// SCRAM mechanisms, as Kafka names them.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// DefaultScramIterations is the iteration count UpsertUser uses when given
// none: Kafka's minimum for SCRAM-SHA-256/512 is 4096; twice that costs a
// login a few milliseconds.
const DefaultScramIterations = 8192

// UserCredential is one SCRAM credential of a user.
type UserCredential struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func scramMechanism(op, m string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(m) {
	case "", ScramSHA256:
		return kadm.ScramSha256, nil
	case ScramSHA512:
		return kadm.ScramSha512, nil
	}
	return 0, invalid(op, "unknown SCRAM mechanism %q (want %s or %s)", m, ScramSHA256, ScramSHA512)
}

func userRes(user string) string { return "user '" + user + "'" }

// UpsertUser creates a SCRAM credential for user, or replaces the
// password of an existing one. mechanism "" means SCRAM-SHA-256;
// iterations <= 0 means DefaultScramIterations.
func (c *Client) UpsertUser(ctx context.Context, user, mechanism, password string, iterations int32) error {
	const op = "create"
	res := userRes(user)
	if user == "" {
		return invalid(op+" user", "empty user name")
	}
	mech, err := scramMechanism(op+" "+res, mechanism)
	if err != nil {
		return err
	}
	if iterations <= 0 {
		iterations = DefaultScramIterations
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, res, err)
	}
	defer cancel()
	rs, err := c.adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: user, Mechanism: mech, Iterations: iterations, Password: password,
	}})
	if err != nil {
		return wrap(op, res, err)
	}
	if r, ok := rs[user]; ok && r.Err != nil {
		return wrapDetail(op, res, r.Err, r.ErrMessage)
	}
	return nil
}

// DeleteUser deletes user's SCRAM credentials for the given mechanisms, or
// all of them if none is given. A user without credentials is an error
// matching ErrNotFound.
func (c *Client) DeleteUser(ctx context.Context, user string, mechanisms ...string) error {
	const op = "drop"
	res := userRes(user)
	if user == "" {
		return invalid(op+" user", "empty user name")
	}
	var mechs []kadm.ScramMechanism
	for _, m := range mechanisms {
		km, err := scramMechanism(op+" "+res, m)
		if err != nil {
			return err
		}
		mechs = append(mechs, km)
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, res, err)
	}
	defer cancel()
	if len(mechs) == 0 {
		desc, err := c.adm.DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return wrap(op, res, err)
		}
		d, ok := desc[user]
		switch {
		case !ok || (d.Err == nil && len(d.CredInfos) == 0):
			return wrap(op, res, kerr.ResourceNotFound)
		case d.Err != nil:
			return wrapDetail(op, res, d.Err, d.ErrMessage)
		}
		for _, ci := range d.CredInfos {
			mechs = append(mechs, ci.Mechanism)
		}
	}
	del := make([]kadm.DeleteSCRAM, len(mechs))
	for i, m := range mechs {
		del[i] = kadm.DeleteSCRAM{User: user, Mechanism: m}
	}
	rs, err := c.adm.AlterUserSCRAMs(ctx, del, nil)
	if err != nil {
		return wrap(op, res, err)
	}
	if r, ok := rs[user]; ok && r.Err != nil {
		return wrapDetail(op, res, r.Err, r.ErrMessage)
	}
	return nil
}

// ListUsers returns every SCRAM credential, sorted by user then mechanism.
func (c *Client) ListUsers(ctx context.Context) ([]UserCredential, error) {
	const op = "list users"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	defer cancel()
	desc, err := c.adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	out := []UserCredential{}
	for _, d := range desc.Sorted() {
		if d.Err != nil {
			return nil, wrapDetail(op, userRes(d.User), d.Err, d.ErrMessage)
		}
		for _, ci := range d.CredInfos {
			out = append(out, UserCredential{User: d.User, Mechanism: ci.Mechanism.String(), Iterations: ci.Iterations})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Mechanism < out[j].Mechanism
	})
	return out, nil
}

// ACLResource names what an ACL applies to.
type ACLResource struct {
	// Type is "topic", "group" or "cluster".
	Type string
	// Name is the topic or group name, or name prefix; unused for the
	// cluster.
	Name string
	// Prefixed makes Name a prefix: the ACL covers every resource whose
	// name starts with it.
	Prefixed bool
}

// ACL is one access control entry as the broker reports it. Resource
// types, patterns and permissions are lower case ("topic", "prefixed",
// "allow"), operations upper case ("READ"), as Kafka's tools print them.
type ACL struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	Pattern      string `json:"pattern"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

var aclOperations = map[string]kadm.ACLOperation{
	"ALL": kadm.OpAll, "READ": kadm.OpRead, "WRITE": kadm.OpWrite, "CREATE": kadm.OpCreate,
	"DELETE": kadm.OpDelete, "ALTER": kadm.OpAlter, "DESCRIBE": kadm.OpDescribe,
	"CLUSTER_ACTION": kadm.OpClusterAction, "DESCRIBE_CONFIGS": kadm.OpDescribeConfigs,
	"ALTER_CONFIGS": kadm.OpAlterConfigs, "IDEMPOTENT_WRITE": kadm.OpIdempotentWrite,
}

// IsACLOperation reports whether name (any case) is an ACL operation Grant
// and Revoke accept: ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
// CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS or IDEMPOTENT_WRITE.
func IsACLOperation(name string) bool {
	_, ok := aclOperations[strings.ToUpper(name)]
	return ok
}

// Principal adds Kafka's "User:" prefix to a bare user name; a name that
// already has a type prefix is returned as is.
func Principal(p string) string {
	if strings.Contains(p, ":") {
		return p
	}
	return "User:" + p
}

// aclBuilder builds the allow-from-any-host ACL (or filter) for principal,
// ops and r.
func aclBuilder(op, principal string, ops []string, r ACLResource) (*kadm.ACLBuilder, error) {
	if principal == "" {
		return nil, invalid(op, "empty principal")
	}
	if len(ops) == 0 {
		return nil, invalid(op, "no operations")
	}
	b := kadm.NewACLs().Allow(Principal(principal)).AllowHosts()
	kops := make([]kadm.ACLOperation, 0, len(ops))
	for _, o := range ops {
		k, ok := aclOperations[strings.ToUpper(o)]
		if !ok {
			return nil, invalid(op, "unknown ACL operation %q", o)
		}
		kops = append(kops, k)
	}
	b.Operations(kops...)
	if r.Prefixed {
		b.ResourcePatternType(kadm.ACLPatternPrefixed)
	} else {
		b.ResourcePatternType(kadm.ACLPatternLiteral)
	}
	switch strings.ToLower(r.Type) {
	case "cluster":
		b.Clusters()
	case "topic":
		if r.Name == "" {
			return nil, invalid(op, "empty topic name")
		}
		b.Topics(r.Name)
	case "group":
		if r.Name == "" {
			return nil, invalid(op, "empty group name")
		}
		b.Groups(r.Name)
	default:
		return nil, invalid(op, "resource type %q (want topic, group or cluster)", r.Type)
	}
	return b, nil
}

// Grant creates allow ACLs, from any host, for principal to perform ops on
// r. Granting an ACL that exists is not an error.
func (c *Client) Grant(ctx context.Context, principal string, ops []string, r ACLResource) error {
	const op = "grant"
	b, err := aclBuilder(op, principal, ops, r)
	if err != nil {
		return err
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, "", err)
	}
	defer cancel()
	rs, err := c.adm.CreateACLs(ctx, b)
	if err != nil {
		return wrap(op, "", err)
	}
	for _, r := range rs {
		if r.Err != nil {
			return wrapDetail(op, "", r.Err, r.ErrMessage)
		}
	}
	return nil
}

// Revoke deletes the allow ACLs, from any host, that let principal perform
// ops on r, and returns how many were deleted.
func (c *Client) Revoke(ctx context.Context, principal string, ops []string, r ACLResource) (int, error) {
	const op = "revoke"
	b, err := aclBuilder(op, principal, ops, r)
	if err != nil {
		return 0, err
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return 0, wrap(op, "", err)
	}
	defer cancel()
	rs, err := c.adm.DeleteACLs(ctx, b)
	if err != nil {
		return 0, wrap(op, "", err)
	}
	n := 0
	for _, r := range rs {
		if r.Err != nil {
			return 0, wrapDetail(op, "", r.Err, r.ErrMessage)
		}
		n += len(r.Deleted)
	}
	return n, nil
}

// ListACLs returns every ACL (allow and deny, any resource and host) of
// principal, or of everyone if principal is "", without duplicates and
// sorted.
func (c *Client) ListACLs(ctx context.Context, principal string) ([]ACL, error) {
	const op = "list ACLs"
	b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
		Operations(kadm.OpAny).AllowHosts().DenyHosts()
	if principal != "" {
		b.Allow(Principal(principal)).Deny(Principal(principal))
	} else {
		b.Allow().Deny()
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	defer cancel()
	rs, err := c.adm.DescribeACLs(ctx, b)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	// One describe filter per allow/deny combination: the same ACL can
	// match more than one.
	seen := map[ACL]bool{}
	out := []ACL{}
	for _, r := range rs {
		if r.Err != nil {
			return nil, wrapDetail(op, "", r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			a := ACL{
				Principal:    d.Principal,
				Host:         d.Host,
				ResourceType: strings.ToLower(d.Type.String()),
				ResourceName: d.Name,
				Pattern:      strings.ToLower(d.Pattern.String()),
				Operation:    strings.ToUpper(d.Operation.String()),
				Permission:   strings.ToLower(d.Permission.String()),
			}
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		for _, f := range [][2]string{
			{a.Principal, b.Principal}, {a.Host, b.Host}, {a.ResourceType, b.ResourceType},
			{a.ResourceName, b.ResourceName}, {a.Pattern, b.Pattern}, {a.Operation, b.Operation},
			{a.Permission, b.Permission},
		} {
			if f[0] != f[1] {
				return f[0] < f[1]
			}
		}
		return false
	})
	return out, nil
}

// Reassignment is a partition reassignment in progress.
type Reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding"`
	Removing  []int32 `json:"removing"`
}

// MovePartition asks the controller to move a partition's replicas to
// brokers (the first becomes the preferred leader). It returns once the
// reassignment is accepted; ListReassignments shows its progress.
func (c *Client) MovePartition(ctx context.Context, topic string, partition int32, brokers []int32) error {
	const op = "move"
	res := partRes(topic, partition)
	if len(brokers) == 0 {
		return invalid(op+" "+res, "no target brokers")
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, res, err)
	}
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, partition, brokers)
	rs, err := c.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return wrap(op, res, err)
	}
	for _, r := range rs.Sorted() {
		if r.Err != nil {
			return wrapDetail(op, res, r.Err, r.ErrMessage)
		}
	}
	return nil
}

// ListReassignments returns the partition reassignments in progress,
// sorted by topic and partition.
func (c *Client) ListReassignments(ctx context.Context) ([]Reassignment, error) {
	const op = "list reassignments"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	defer cancel()
	rs, err := c.adm.ListPartitionReassignments(ctx, nil)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	out := []Reassignment{}
	for _, r := range rs.Sorted() {
		out = append(out, Reassignment{
			Topic: r.Topic, Partition: r.Partition, Replicas: r.Replicas,
			Adding: r.AddingReplicas, Removing: r.RemovingReplicas,
		})
	}
	return out, nil
}
