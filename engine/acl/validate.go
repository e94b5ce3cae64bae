package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is the class of bindings and filters Kafka refuses with
// INVALID_REQUEST; the error says which field is wrong.
var ErrInvalid = errors.New("invalid ACL")

// Validate reports whether b may be created (CreateAcls), with Kafka's
// rules (AclControlManager.validateNewAcl and the broker's AclApis): a
// concrete resource type, pattern type, operation and permission (no
// UNKNOWN, no filter-only ANY or MATCH), a non-empty resource name, the
// cluster resource only by its name "kafka-cluster", and a principal of
// the form Type:Name.
func Validate(b Binding) error {
	switch {
	case b.ResourceType < ResourceTopic || b.ResourceType > ResourceUser:
		return fmt.Errorf("%w: resource type %v", ErrInvalid, b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("%w: pattern type %v (want LITERAL or PREFIXED)", ErrInvalid, b.PatternType)
	case b.Operation < OpAll || b.Operation > OpDescribeTokens:
		return fmt.Errorf("%w: operation %v", ErrInvalid, b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return fmt.Errorf("%w: permission type %v (want ALLOW or DENY)", ErrInvalid, b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s, not %q", ErrInvalid, ClusterName, b.ResourceName)
	case !strings.Contains(b.Principal, ":"):
		return fmt.Errorf("%w: could not parse principal %q (no colon separating the principal type from the name)", ErrInvalid, b.Principal)
	}
	return nil
}

// Validate reports whether f may select bindings (DescribeAcls,
// DeleteAcls): Kafka refuses a filter with an UNKNOWN field (or a code
// it does not know) with INVALID_REQUEST; ANY and MATCH are fine.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType < ResourceAny || f.ResourceType > ResourceUser:
		return fmt.Errorf("%w filter: resource type %v", ErrInvalid, f.ResourceType)
	case f.PatternType < PatternAny || f.PatternType > PatternPrefixed:
		return fmt.Errorf("%w filter: pattern type %v", ErrInvalid, f.PatternType)
	case f.Operation < OpAny || f.Operation > OpDescribeTokens:
		return fmt.Errorf("%w filter: operation %v", ErrInvalid, f.Operation)
	case f.Permission < PermissionAny || f.Permission > PermissionAllow:
		return fmt.Errorf("%w filter: permission type %v", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b, as Kafka's AclBindingFilter.matches:
// each field matches if the filter leaves it open (nil, ANY) or equals it;
// the name, with pattern type ANY or b's own pattern type, must equal b's;
// with MATCH, b must be a binding that applies to the filter's name taken
// as a literal resource: the literal name itself, the literal "*", or a
// prefix of it.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case f.PatternType == PatternAny || f.PatternType == b.PatternType:
			if name != b.ResourceName {
				return false
			}
		case b.PatternType == PatternLiteral:
			if name != b.ResourceName && b.ResourceName != WildcardResource {
				return false
			}
		case b.PatternType == PatternPrefixed:
			if !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	switch {
	case f.Principal != nil && *f.Principal != b.Principal,
		f.Host != nil && *f.Host != b.Host,
		f.Operation != OpAny && f.Operation != b.Operation,
		f.Permission != PermissionAny && f.Permission != b.Permission:
		return false
	}
	return true
}

func (t ResourceType) String() string {
	switch t {
	case ResourceUnknown:
		return "UNKNOWN"
	case ResourceAny:
		return "ANY"
	case ResourceTopic:
		return "TOPIC"
	case ResourceGroup:
		return "GROUP"
	case ResourceCluster:
		return "CLUSTER"
	case ResourceTransactionalID:
		return "TRANSACTIONAL_ID"
	case ResourceDelegationToken:
		return "DELEGATION_TOKEN"
	case ResourceUser:
		return "USER"
	}
	return fmt.Sprintf("ResourceType(%d)", int8(t))
}

var opNames = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}

func (o Operation) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

func (p PatternType) String() string {
	switch p {
	case PatternUnknown:
		return "UNKNOWN"
	case PatternAny:
		return "ANY"
	case PatternMatch:
		return "MATCH"
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

func (p Permission) String() string {
	switch p {
	case PermissionUnknown:
		return "UNKNOWN"
	case PermissionAny:
		return "ANY"
	case PermissionDeny:
		return "DENY"
	case PermissionAllow:
		return "ALLOW"
	}
	return fmt.Sprintf("Permission(%d)", int8(p))
}
