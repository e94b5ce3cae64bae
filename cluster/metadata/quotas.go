package metadata

import (
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Quota keys (Kafka's QuotaConfigs names).
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// quotaKeyIntegral says whether a quota key holds an integer (Kafka's LONG
// and INT config types refuse fractions) and its maximum.
var quotaKeys = map[string]struct {
	integral bool
	max      float64
}{
	QuotaProducerByteRate:       {true, math.MaxInt64},
	QuotaConsumerByteRate:       {true, math.MaxInt64},
	QuotaRequestPercentage:      {false, math.MaxFloat64},
	QuotaControllerMutationRate: {false, math.MaxFloat64},
	QuotaConnectionCreationRate: {true, math.MaxInt32},
}

// MaxQuotaEntities bounds the quota entities a cluster stores.
const MaxQuotaEntities = 100_000

// MaxQuotaEntityName bounds an entity name (a user, client id or IP).
const MaxQuotaEntityName = 1024

// CanonicalQuotaEntity validates a quota entity as Kafka's
// ClientQuotaControlManager does and returns it sorted by type (the form
// the cluster stores and compares): at least one part, each type once and
// one of user, client-id, ip (else ErrUnsupportedQuotaEntity), no empty
// name, an ip name that is an IP address, and a combination Kafka allows
// (user, client-id, user and client-id, or ip alone).
func CanonicalQuotaEntity(entity []QuotaEntityPart) ([]QuotaEntityPart, error) {
	if len(entity) == 0 {
		return nil, fmt.Errorf("%w: invalid empty client quota entity", ErrInvalidRequest)
	}
	seen := map[string]bool{}
	out := make([]QuotaEntityPart, 0, len(entity))
	for _, p := range entity {
		if seen[p.Type] {
			return nil, fmt.Errorf("%w: duplicate entity type %q in client quota entity", ErrInvalidRequest, p.Type)
		}
		seen[p.Type] = true
		switch p.Type {
		case QuotaEntityUser, QuotaEntityClientID, QuotaEntityIP:
		default:
			return nil, fmt.Errorf("%w: %q (want %s, %s or %s)", ErrUnsupportedQuotaEntity, p.Type, QuotaEntityUser, QuotaEntityClientID, QuotaEntityIP)
		}
		if p.Name != nil {
			switch {
			case *p.Name == "":
				return nil, fmt.Errorf("%w: empty %s not supported (a default entity has no name)", ErrInvalidRequest, p.Type)
			case len(*p.Name) > MaxQuotaEntityName:
				return nil, fmt.Errorf("%w: %s name of %d bytes; the limit is %d", ErrInvalidRequest, p.Type, len(*p.Name), MaxQuotaEntityName)
			}
			if p.Type == QuotaEntityIP {
				if _, err := netip.ParseAddr(*p.Name); err != nil {
					return nil, fmt.Errorf("%w: %q is not a valid IP address", ErrInvalidRequest, *p.Name)
				}
			}
		}
		q := p
		if p.Name != nil {
			n := *p.Name
			q.Name = &n
		}
		out = append(out, q)
	}
	if seen[QuotaEntityIP] && len(out) > 1 {
		return nil, fmt.Errorf("%w: an ip quota entity cannot be combined with user or client-id", ErrInvalidRequest)
	}
	slices.SortFunc(out, func(a, b QuotaEntityPart) int { return strings.Compare(a.Type, b.Type) })
	return out, nil
}

// ValidQuotaKeys are the quota keys an entity (canonical) may set.
func ValidQuotaKeys(entity []QuotaEntityPart) []string {
	if len(entity) == 1 && entity[0].Type == QuotaEntityIP {
		return []string{QuotaConnectionCreationRate}
	}
	return []string{QuotaConsumerByteRate, QuotaControllerMutationRate, QuotaProducerByteRate, QuotaRequestPercentage}
}

// ValidateQuotaValue checks a value to set for key on entity (canonical)
// as Kafka does: a key valid for the entity type, greater than 0, no
// fraction for the integral keys (byte rates, connection rate) and within
// their range. Errors match ErrInvalidRequest.
func ValidateQuotaValue(entity []QuotaEntityPart, key string, value float64) error {
	if !slices.Contains(ValidQuotaKeys(entity), key) {
		return fmt.Errorf("%w: invalid configuration key %q for this entity (valid: %s)", ErrInvalidRequest, key, strings.Join(ValidQuotaKeys(entity), ", "))
	}
	k := quotaKeys[key]
	switch {
	case math.IsNaN(value) || math.IsInf(value, 0):
		return fmt.Errorf("%w: quota %s must be a finite number", ErrInvalidRequest, key)
	case value <= 0:
		return fmt.Errorf("%w: quota %s must be greater than 0", ErrInvalidRequest, key)
	case value > k.max:
		return fmt.Errorf("%w: proposed value for %s is too large", ErrInvalidRequest, key)
	case k.integral && value-math.Floor(value) > 1e-8:
		return fmt.Errorf("%w: %s cannot be a fractional value", ErrInvalidRequest, key)
	}
	return nil
}

// QuotaEntityKey is a canonical entity's key: its parts joined by NUL,
// each its type alone (the default entity) or type=name with the name
// quoted, so no name can make two entities share a key.
func QuotaEntityKey(entity []QuotaEntityPart) string {
	var sb strings.Builder
	for i, p := range entity {
		if i > 0 {
			sb.WriteByte(0)
		}
		sb.WriteString(p.Type)
		if p.Name != nil {
			sb.WriteByte('=')
			sb.WriteString(strconv.Quote(*p.Name))
		}
	}
	return sb.String()
}

// Clone returns a deep copy.
func (q ClientQuota) Clone() ClientQuota {
	out := ClientQuota{Entity: make([]QuotaEntityPart, len(q.Entity)), Values: make(map[string]float64, len(q.Values))}
	for i, p := range q.Entity {
		out.Entity[i] = p
		if p.Name != nil {
			n := *p.Name
			out.Entity[i].Name = &n
		}
	}
	for k, v := range q.Values {
		out.Values[k] = v
	}
	return out
}

// String prints the credential without its salt and keys, so a log line
// or a %v never shows them.
func (c ScramCredential) String() string {
	return fmt.Sprintf("ScramCredential{User:%s Mechanism:%s Iterations:%d}", c.User, c.Mechanism, c.Iterations)
}

// GoString is String for %#v.
func (c ScramCredential) GoString() string { return c.String() }

// LogValue logs the credential without its salt and keys (slog's JSON
// handler would otherwise print them).
func (c ScramCredential) LogValue() slog.Value {
	return slog.GroupValue(slog.String("user", c.User), slog.String("mechanism", c.Mechanism), slog.Int("iterations", int(c.Iterations)))
}
