package kafka

// The client quota APIs: DescribeClientQuotas (48, v0-1) and
// AlterClientQuotas (49, v0-1), over the quotas the cluster metadata
// stores. Entities are user, client-id, user with client-id, or ip; a
// null name is the type's default. Describe filters as Kafka's QuotaImage
// does (EXACT with a name, DEFAULT, ANY; strict: no other entity types;
// each type once, one of user, client-id, ip; ip not with user or
// client-id), refusing a bad filter with INVALID_REQUEST and an unknown
// match type with UNSUPPORTED_VERSION for the whole request. Alter answers
// per entity, INVALID_REQUEST for: a key not valid for the entity (ip:
// connection_creation_rate only; user/client-id: producer_byte_rate,
// consumer_byte_rate, request_percentage, controller_mutation_rate), a
// value not > 0, a fraction of an integral rate, a key twice, a bad or
// unknown entity type, an entity twice in one request (the first
// applies). Removing a value that is not set succeeds and changes
// nothing. Enforcement is not here. Authorization is not decided here.

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// quotaFilter is a parsed DescribeClientQuotas filter.
type quotaFilter struct {
	exact  map[string]*string // type -> name (nil: the default)
	any    map[string]bool
	strict bool
}

func parseQuotaFilter(req *kmsg.DescribeClientQuotasRequest) (quotaFilter, *kerr.Error, error) {
	f := quotaFilter{exact: map[string]*string{}, any: map[string]bool{}, strict: req.Strict}
	for _, comp := range req.Components {
		typ := comp.EntityType
		if typ == "" {
			return f, kerr.InvalidRequest, fmt.Errorf("invalid empty entity type")
		}
		if _, ok := f.exact[typ]; ok || f.any[typ] {
			return f, kerr.InvalidRequest, fmt.Errorf("entity type %s cannot appear more than once in the filter", typ)
		}
		switch typ {
		case metadata.QuotaEntityUser, metadata.QuotaEntityClientID, metadata.QuotaEntityIP:
		default:
			return f, kerr.InvalidRequest, fmt.Errorf("custom entity type %s not supported (want user, client-id or ip)", typ)
		}
		switch comp.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if comp.Match == nil {
				return f, kerr.InvalidRequest, fmt.Errorf("request specified MATCH_TYPE_EXACT, but set match string to null")
			}
			f.exact[typ] = comp.Match
		case kmsg.QuotasMatchTypeDefault:
			if comp.Match != nil {
				return f, kerr.InvalidRequest, fmt.Errorf("request specified MATCH_TYPE_DEFAULT, but also specified a match string")
			}
			f.exact[typ] = nil
		case kmsg.QuotasMatchTypeAny:
			if comp.Match != nil {
				return f, kerr.InvalidRequest, fmt.Errorf("request specified MATCH_TYPE_SPECIFIED, but also specified a match string")
			}
			f.any[typ] = true
		default:
			return f, kerr.UnsupportedVersion, fmt.Errorf("unknown match type %d", comp.MatchType)
		}
	}
	has := func(t string) bool { _, ok := f.exact[t]; return ok || f.any[t] }
	if has(metadata.QuotaEntityIP) && (has(metadata.QuotaEntityUser) || has(metadata.QuotaEntityClientID)) {
		return f, kerr.InvalidRequest, fmt.Errorf("invalid entity filter component combination: an ip filter component cannot be used with user or client-id components")
	}
	return f, nil, nil
}

func (f quotaFilter) matches(entity []metadata.QuotaEntityPart) bool {
	if f.strict && len(entity) != len(f.exact)+len(f.any) {
		return false
	}
	find := func(typ string) (metadata.QuotaEntityPart, bool) {
		i := slices.IndexFunc(entity, func(p metadata.QuotaEntityPart) bool { return p.Type == typ })
		if i < 0 {
			return metadata.QuotaEntityPart{}, false
		}
		return entity[i], true
	}
	for typ, name := range f.exact {
		p, ok := find(typ)
		if !ok || (name == nil) != (p.Name == nil) || (name != nil && *name != *p.Name) {
			return false
		}
	}
	for typ := range f.any {
		if _, ok := find(typ); !ok {
			return false
		}
	}
	return true
}

func (c *conn) handleDescribeClientQuotas(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	f, kcode, err := parseQuotaFilter(req)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kcode.Code, errMessage(err)
		return resp, nil
	}
	quotas, _ := c.s.meta.ClientQuotas()
	for _, q := range quotas {
		if !f.matches(q.Entity) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			e.Entity = append(e.Entity, ent)
		}
		keys := make([]string, 0, len(q.Values))
		for k := range q.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

func (c *conn) handleAlterClientQuotas(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	alts := make([]metadata.ClientQuotaAlteration, len(req.Entries))
	for i, e := range req.Entries {
		for _, p := range e.Entity {
			alts[i].Entity = append(alts[i].Entity, metadata.QuotaEntityPart{Type: p.Type, Name: p.Name})
		}
		for _, op := range e.Ops {
			alts[i].Ops = append(alts[i].Ops, metadata.ClientQuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
	}
	var errs []error
	if len(alts) > 0 {
		ctx, cancel := c.adminCtx(0)
		errs = c.s.meta.AlterClientQuotas(ctx, alts, req.ValidateOnly)
		cancel()
	}
	for i, e := range req.Entries {
		res := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			res.Entity = append(res.Entity, ent)
		}
		if i < len(errs) && errs[i] != nil {
			res.ErrorCode, res.ErrorMessage = c.securityErrCode(errs[i]), errMessage(errs[i])
		}
		resp.Entries = append(resp.Entries, res)
	}
	return resp, nil
}
