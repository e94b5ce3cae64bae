package acl

import "fmt"

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
