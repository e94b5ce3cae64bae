package metadata

import (
	"errors"
	"fmt"
	"strings"

	"github.com/moonmq/moonmq/engine/acl"
)

// Sentinel errors of the security admin APIs beyond those in security.go.
var (
	// ErrUnacceptableCredential: a SCRAM credential with too few or too
	// many iterations, an empty user name or salt (UNACCEPTABLE_CREDENTIAL).
	ErrUnacceptableCredential = errors.New("unacceptable credential")
	// ErrDuplicateResource: one request names the same user twice
	// (DUPLICATE_RESOURCE).
	ErrDuplicateResource = errors.New("duplicate resource")
	// ErrUnsupportedQuotaEntity: a client quota entity type other than
	// user, client-id and ip. It also matches ErrInvalidRequest, Kafka's
	// answer (INVALID_REQUEST).
	ErrUnsupportedQuotaEntity = fmt.Errorf("%w: unsupported client quota entity type", ErrInvalidRequest)
)

// ClusterResourceName is the one name of the CLUSTER resource.
const ClusterResourceName = "kafka-cluster"

// MaxACLs bounds the bindings a cluster stores: each is checked on the
// authorizer's build and every DescribeAcls scans them all.
const MaxACLs = 100_000

// ValidateACLBinding checks a binding to create as Kafka's controller does
// (AclControlManager.validateNewAcl and the CreateAcls handler): concrete
// enum values only (no ANY, MATCH or UNKNOWN), a principal of the form
// "Type:Name", a host and a resource name, and "kafka-cluster" as the only
// CLUSTER resource. Errors match ErrInvalidRequest.
func ValidateACLBinding(b acl.Binding) error {
	switch {
	case b.ResourceType < acl.ResourceTopic || b.ResourceType > acl.ResourceUser:
		return fmt.Errorf("%w: invalid resource type %d", ErrInvalidRequest, b.ResourceType)
	case b.PatternType != acl.PatternLiteral && b.PatternType != acl.PatternPrefixed:
		return fmt.Errorf("%w: invalid pattern type %d (want LITERAL or PREFIXED)", ErrInvalidRequest, b.PatternType)
	case b.Operation < acl.OpAll || b.Operation > acl.OpDescribeTokens:
		return fmt.Errorf("%w: invalid operation %d", ErrInvalidRequest, b.Operation)
	case b.Permission != acl.PermissionAllow && b.Permission != acl.PermissionDeny:
		return fmt.Errorf("%w: invalid permission type %d (want ALLOW or DENY)", ErrInvalidRequest, b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("%w: resource name should not be empty", ErrInvalidRequest)
	case b.ResourceType == acl.ResourceCluster && b.ResourceName != ClusterResourceName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalidRequest, ClusterResourceName)
	case b.Host == "":
		return fmt.Errorf("%w: host should not be empty (use %q for every host)", ErrInvalidRequest, acl.WildcardHost)
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("%w: could not parse principal %q (want Type:Name, e.g. User:alice)", ErrInvalidRequest, b.Principal)
	}
	return nil
}

// ValidateACLFilter checks a DescribeAcls or DeleteAcls filter as Kafka
// does: no UNKNOWN (or out of range) value. Errors match ErrInvalidRequest.
func ValidateACLFilter(f acl.Filter) error {
	switch {
	case f.ResourceType < acl.ResourceAny || f.ResourceType > acl.ResourceUser:
		return fmt.Errorf("%w: unknown resource type %d in filter", ErrInvalidRequest, f.ResourceType)
	case f.PatternType < acl.PatternAny || f.PatternType > acl.PatternPrefixed:
		return fmt.Errorf("%w: unknown pattern type %d in filter", ErrInvalidRequest, f.PatternType)
	case f.Operation < acl.OpAny || f.Operation > acl.OpDescribeTokens:
		return fmt.Errorf("%w: unknown operation %d in filter", ErrInvalidRequest, f.Operation)
	case f.Permission < acl.PermissionAny || f.Permission > acl.PermissionAllow:
		return fmt.Errorf("%w: unknown permission type %d in filter", ErrInvalidRequest, f.Permission)
	}
	return nil
}

// ACLFilterMatches reports whether f selects b, with Kafka's rules
// (ResourcePatternFilter.matches, AccessControlEntryFilter.matches): a nil
// string or an Any value matches anything; PatternMatch with a name
// selects the bindings that would apply to that literal name (equal
// literal, the "*" literal, prefixed ones the name starts with).
func ACLFilterMatches(f acl.Filter, b acl.Binding) bool {
	if f.ResourceType != acl.ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != acl.PatternAny && f.PatternType != acl.PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType == acl.PatternAny || f.PatternType == b.PatternType {
			if name != b.ResourceName {
				return false
			}
		} else { // PatternMatch
			switch b.PatternType {
			case acl.PatternLiteral:
				if name != b.ResourceName && b.ResourceName != acl.WildcardResource {
					return false
				}
			case acl.PatternPrefixed:
				if !strings.HasPrefix(name, b.ResourceName) {
					return false
				}
			default:
				return false
			}
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != acl.OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == acl.PermissionAny || f.Permission == b.Permission
}

// CompareACLBindings orders bindings by resource (type, pattern type,
// name), then principal, host, operation and permission: the order ACLs()
// lists them in, which groups a resource's bindings together.
func CompareACLBindings(a, b acl.Binding) int {
	switch {
	case a.ResourceType != b.ResourceType:
		return int(a.ResourceType) - int(b.ResourceType)
	case a.PatternType != b.PatternType:
		return int(a.PatternType) - int(b.PatternType)
	case a.ResourceName != b.ResourceName:
		return strings.Compare(a.ResourceName, b.ResourceName)
	case a.Principal != b.Principal:
		return strings.Compare(a.Principal, b.Principal)
	case a.Host != b.Host:
		return strings.Compare(a.Host, b.Host)
	case a.Operation != b.Operation:
		return int(a.Operation) - int(b.Operation)
	}
	return int(a.Permission) - int(b.Permission)
}
