// Package acl owns authorization decisions: given a principal, the host it
// connects from, an operation and a resource, may it? Bindings follow
// Kafka's model exactly (resource types, the thirteen operations and their
// implications, LITERAL and PREFIXED patterns, the "*" wildcards, ALLOW and
// DENY with DENY winning), so Kafka's admin tools and clients describe and
// change them unchanged. The numeric values of the enums are Kafka's wire
// codes.
//
// Invariants: this package is a leaf (no other MoonMQ package, no I/O);
// an Authorizer is immutable once built, so readers never lock; principals
// are Kafka's "Type:Name" strings (User:alice, User:*).
package acl

// ResourceType is what an ACL protects (Kafka's ResourceType codes).
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// Operation is what a principal does to a resource (Kafka's AclOperation
// codes).
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// PatternType says how a binding's resource name matches (Kafka's
// PatternType codes).
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: any pattern type
	PatternMatch    PatternType = 2 // filters only: bindings that would match the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Permission is ALLOW or DENY (Kafka's AclPermissionType codes).
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcards: a literal resource name "*" matches every resource of its
// type, principal "User:*" every user, host "*" every host.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// Binding is one ACL: Principal may (Allow) or may not (Deny) do
// Operation on the resources of ResourceType whose name matches
// ResourceName by PatternType, when connecting from Host.
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

// Filter selects bindings (DescribeAcls, DeleteAcls): a nil string matches
// any value, and the enums' Any values any value; PatternMatch selects the
// bindings that would apply to the literal ResourceName (the literal and
// wildcard bindings and the prefixed ones it starts with).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}
