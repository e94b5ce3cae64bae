package controller

// The Controller's API of the security metadata (security.go holds its
// records and state): reads from the published view, writes routed to
// the active controller like every other change, with Kafka's per-item
// errors.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
)

// Operations of the controller RPC for the security metadata.
const (
	rpcCreateACLs            = "create_acls"
	rpcDeleteACLs            = "delete_acls"
	rpcAlterScramCredentials = "alter_scram_credentials"
	rpcAlterClientQuotas     = "alter_client_quotas"
)

// maxBindingsPerEntry bounds one entry's ACL records, so a CreateAcls of
// many bindings is several entries (and RPC requests) of bounded size.
const maxBindingsPerEntry = 1000

type (
	aclArgs struct {
		Bindings []acl.Binding `json:"bindings,omitempty"`
		Filters  []aclFilter   `json:"filters,omitempty"`
	}
	// aclFilter is acl.Filter on the wire (it has no JSON tags).
	aclFilter struct {
		ResourceType acl.ResourceType `json:"resource_type"`
		ResourceName *string          `json:"resource_name,omitempty"`
		PatternType  acl.PatternType  `json:"pattern_type"`
		Principal    *string          `json:"principal,omitempty"`
		Host         *string          `json:"host,omitempty"`
		Operation    acl.Operation    `json:"operation"`
		Permission   acl.Permission   `json:"permission"`
	}
	scramArgs struct {
		Upserts   []scramCredentialRecord       `json:"upserts,omitempty"`
		Deletions []removeScramCredentialRecord `json:"deletions,omitempty"`
	}
	quotaArgs struct {
		Alterations []quotaAlteration `json:"alterations"`
	}
	quotaAlteration struct {
		Entity []metadata.QuotaEntityPart `json:"entity"`
		Ops    []quotaOp                  `json:"ops"`
	}
	quotaOp struct {
		Key    string  `json:"key"`
		Value  float64 `json:"value"`
		Remove bool    `json:"remove,omitempty"`
	}
	// itemErrors is one error (or nil) per item of a request, as the RPC
	// carries them.
	itemErrors struct {
		Errs []*rpcError `json:"errs"`
	}
	deleteACLsResult struct {
		Deleted [][]acl.Binding `json:"deleted"`
		Errs    []*rpcError     `json:"errs"`
	}
)

// spread puts the answer of a routed call about the items at positions at
// of errs back in place: the call's error (err) for every one of them, or
// each item's own.
func (e itemErrors) spread(errs []error, at []int, err error) {
	for j, i := range at {
		switch {
		case err != nil:
			errs[i] = err
		case j < len(e.Errs) && e.Errs[j] != nil:
			errs[i] = e.Errs[j].toError()
		default:
			errs[i] = nil
		}
	}
}

func rpcErrors(errs []error) []*rpcError {
	out := make([]*rpcError, len(errs))
	for i, err := range errs {
		if err != nil {
			out[i] = toRPCError(err)
		}
	}
	return out
}

// securityView is what ACLs and ClientQuotas answer: the FSM's immutable
// slices and their versions.
type securityView struct {
	acls         []acl.Binding
	aclVersion   uint64
	quotas       []metadata.ClientQuota
	quotaVersion uint64
}

// publishSecurity makes s what ACLs and ClientQuotas answer. The caller
// holds the write lock (or is Open, before Raft runs).
func (c *Controller) publishSecurity(s *securityState) {
	cur := c.sec.Load()
	if cur != nil && cur.aclVersion == s.aclVersion && cur.quotaVersion == s.quotaVersion &&
		len(cur.acls) == len(s.acls) && len(cur.quotas) == len(s.quotaList) {
		return // unchanged (the entry changed something else)
	}
	c.sec.Store(&securityView{acls: s.acls, aclVersion: s.aclVersion, quotas: s.quotaList, quotaVersion: s.quotaVersion})
}

// ACLs returns every ACL binding, sorted by metadata.CompareACLBindings,
// and their version (the log index of the last change, 0 if none). The
// slice is shared and immutable: callers must not modify it. It takes no
// lock: an authorizer may call it on every request.
func (c *Controller) ACLs() ([]acl.Binding, uint64) {
	v := c.sec.Load()
	if v == nil {
		return nil, 0
	}
	return v.acls, v.aclVersion
}

// CreateACLs creates bindings, answering one error (or nil) per binding:
// metadata.ErrInvalidRequest for a binding Kafka would refuse
// (metadata.ValidateACLBinding). Creating an existing binding succeeds
// and changes nothing. It returns once this node applied the change.
func (c *Controller) CreateACLs(ctx context.Context, bs []acl.Binding) []error {
	errs := make([]error, len(bs))
	var valid []acl.Binding
	var at []int
	for i, b := range bs {
		if err := metadata.ValidateACLBinding(b); err != nil {
			errs[i] = err
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	for start := 0; start < len(valid); start += maxBindingsPerEntry {
		end := min(start+maxBindingsPerEntry, len(valid))
		_, index, err := route(c, ctx, rpcCreateACLs, aclArgs{Bindings: valid[start:end]}, (*Controller).createACLsLocal)
		c.afterChange(ctx, "create acls", index, false)
		if err != nil {
			for _, i := range at[start:end] {
				errs[i] = err
			}
		}
	}
	return errs
}

func (c *Controller) createACLsLocal(ctx context.Context, a aclArgs) (none, uint64, error) {
	_, index, err := c.commit(ctx, "create acls", func(st *state) ([]record, error) {
		seen := map[acl.Binding]bool{}
		var recs []record
		for _, b := range a.Bindings {
			if err := metadata.ValidateACLBinding(b); err != nil {
				return nil, err
			}
			if _, exists := st.sec.aclSet[b]; exists || seen[b] {
				continue
			}
			seen[b] = true
			recs = append(recs, &aclRecord{Binding: b})
		}
		return recs, nil
	})
	return none{}, index, err
}

// DeleteACLs deletes the bindings each filter selects
// (metadata.ACLFilterMatches) and answers, per filter, the bindings it
// deleted or an error (metadata.ErrInvalidRequest for a filter with an
// UNKNOWN value). A binding two filters select is deleted once and listed
// for both, as Kafka does.
func (c *Controller) DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, []error) {
	deleted := make([][]acl.Binding, len(fs))
	errs := make([]error, len(fs))
	var valid []aclFilter
	var at []int
	for i, f := range fs {
		if err := metadata.ValidateACLFilter(f); err != nil {
			errs[i] = err
			continue
		}
		valid = append(valid, aclFilter(f))
		at = append(at, i)
	}
	if len(valid) == 0 {
		return deleted, errs
	}
	res, index, err := route(c, ctx, rpcDeleteACLs, aclArgs{Filters: valid}, (*Controller).deleteACLsLocal)
	c.afterChange(ctx, "delete acls", index, false)
	for j, i := range at {
		switch {
		case err != nil:
			errs[i] = err
		case j < len(res.Errs) && res.Errs[j] != nil:
			errs[i] = res.Errs[j].toError()
		case j < len(res.Deleted):
			deleted[i] = res.Deleted[j]
		}
	}
	return deleted, errs
}

func (c *Controller) deleteACLsLocal(ctx context.Context, a aclArgs) (deleteACLsResult, uint64, error) {
	res := deleteACLsResult{Deleted: make([][]acl.Binding, len(a.Filters)), Errs: make([]*rpcError, len(a.Filters))}
	// Select under wmu, so no change of this controller comes between
	// the selection and the first removal.
	c.wmu.Lock()
	if err := c.writable(); err != nil {
		c.wmu.Unlock()
		return deleteACLsResult{}, 0, err
	}
	c.mu.RLock()
	removed := map[acl.Binding]bool{}
	var victims []acl.Binding
	for i, wf := range a.Filters {
		f := acl.Filter(wf)
		if err := metadata.ValidateACLFilter(f); err != nil {
			res.Errs[i] = toRPCError(err)
			continue
		}
		res.Deleted[i] = []acl.Binding{}
		for _, b := range c.st.sec.acls {
			if !metadata.ACLFilterMatches(f, b) {
				continue
			}
			res.Deleted[i] = append(res.Deleted[i], b)
			if !removed[b] {
				removed[b] = true
				victims = append(victims, b)
			}
		}
	}
	c.mu.RUnlock()
	c.wmu.Unlock()
	// Removed in entries of bounded size (a filter may select every ACL).
	var index uint64
	for start := 0; start < len(victims); start += maxBindingsPerEntry {
		chunk := victims[start:min(start+maxBindingsPerEntry, len(victims))]
		_, idx, err := c.commit(ctx, "delete acls", func(st *state) ([]record, error) {
			var recs []record
			for _, b := range chunk {
				if _, ok := st.sec.aclSet[b]; ok { // else deleted meanwhile
					recs = append(recs, &removeACLRecord{Binding: b})
				}
			}
			return recs, nil
		})
		if err != nil {
			return deleteACLsResult{}, index, err
		}
		index = max(index, idx)
	}
	return res, index, nil
}

// ScramCredential returns a user's credential for a mechanism.
func (c *Controller) ScramCredential(user, mechanism string) (metadata.ScramCredential, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cr, ok := c.st.sec.scram[scramKey{user, mechanism}]
	if !ok {
		return metadata.ScramCredential{}, false
	}
	return cloneScram(cr), true
}

// ScramCredentials returns every credential, sorted by user and mechanism.
func (c *Controller) ScramCredentials() []metadata.ScramCredential {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]metadata.ScramCredential, 0, len(c.st.sec.scram))
	for _, cr := range c.st.sec.scram {
		out = append(out, cloneScram(cr))
	}
	slices.SortFunc(out, func(a, b metadata.ScramCredential) int {
		if a.User != b.User {
			return strings.Compare(a.User, b.User)
		}
		return strings.Compare(a.Mechanism, b.Mechanism)
	})
	return out
}

func cloneScram(c metadata.ScramCredential) metadata.ScramCredential {
	c.Salt, c.StoredKey, c.ServerKey = slices.Clone(c.Salt), slices.Clone(c.StoredKey), slices.Clone(c.ServerKey)
	return c
}

// AlterScramCredentials creates or replaces (upserts) and deletes SCRAM
// credentials, answering one error (or nil) per item, upserts first, with
// Kafka's rules: a user named more than once in the request, by any item,
// is refused for all of them (metadata.ErrDuplicateResource); an unknown
// mechanism is metadata.ErrUnsupportedSaslMechanism; too few or too many
// iterations or an empty user metadata.ErrUnacceptableCredential; deleting
// a credential that does not exist metadata.ErrResourceNotFound.
func (c *Controller) AlterScramCredentials(ctx context.Context, upserts []metadata.ScramCredential, deletions []metadata.ScramDeletion) []error {
	n := len(upserts) + len(deletions)
	errs := make([]error, n)
	count := map[string]int{}
	for _, u := range upserts {
		count[u.User]++
	}
	for _, d := range deletions {
		count[d.User]++
	}
	var a scramArgs
	var at []int
	for i, u := range upserts {
		if count[u.User] > 1 {
			errs[i] = fmt.Errorf("%w: user %q is altered more than once in one request", metadata.ErrDuplicateResource, u.User)
			continue
		}
		if err := validateScramCredential(u); err != nil {
			errs[i] = err
			continue
		}
		a.Upserts = append(a.Upserts, scramCredentialRecord{User: u.User, Mechanism: u.Mechanism, Salt: u.Salt,
			StoredKey: u.StoredKey, ServerKey: u.ServerKey, Iterations: u.Iterations})
		at = append(at, i)
	}
	for j, d := range deletions {
		i := len(upserts) + j
		switch {
		case count[d.User] > 1:
			errs[i] = fmt.Errorf("%w: user %q is altered more than once in one request", metadata.ErrDuplicateResource, d.User)
			continue
		case d.User == "":
			errs[i] = fmt.Errorf("%w: username must not be empty", metadata.ErrUnacceptableCredential)
			continue
		case metadata.ScramHash(d.Mechanism) == nil:
			errs[i] = fmt.Errorf("%w: %q", metadata.ErrUnsupportedSaslMechanism, d.Mechanism)
			continue
		}
		a.Deletions = append(a.Deletions, removeScramCredentialRecord{User: d.User, Mechanism: d.Mechanism})
		at = append(at, i)
	}
	if len(at) == 0 {
		return errs
	}
	res, index, err := route(c, ctx, rpcAlterScramCredentials, a, (*Controller).alterScramLocal)
	c.afterChange(ctx, "alter scram credentials", index, false)
	res.spread(errs, at, err)
	return errs
}

func (c *Controller) alterScramLocal(ctx context.Context, a scramArgs) (itemErrors, uint64, error) {
	errs := make([]error, len(a.Upserts)+len(a.Deletions))
	_, index, err := c.commit(ctx, "alter scram credentials", func(st *state) ([]record, error) {
		users := map[string]bool{}
		var recs []record
		for i, u := range a.Upserts {
			cr := metadata.ScramCredential{User: u.User, Mechanism: u.Mechanism, Salt: u.Salt, StoredKey: u.StoredKey,
				ServerKey: u.ServerKey, Iterations: u.Iterations}
			if err := validateScramCredential(cr); err != nil {
				errs[i] = err
				continue
			}
			if users[u.User] {
				errs[i] = fmt.Errorf("%w: user %q", metadata.ErrDuplicateResource, u.User)
				continue
			}
			users[u.User] = true
			r := u
			recs = append(recs, &r)
		}
		for j, d := range a.Deletions {
			i := len(a.Upserts) + j
			if users[d.User] {
				errs[i] = fmt.Errorf("%w: user %q", metadata.ErrDuplicateResource, d.User)
				continue
			}
			users[d.User] = true
			if _, ok := st.sec.scram[scramKey{d.User, d.Mechanism}]; !ok {
				errs[i] = fmt.Errorf("%w: attempt to delete a user credential that does not exist (%s of %q)", metadata.ErrResourceNotFound, d.Mechanism, d.User)
				continue
			}
			r := d
			recs = append(recs, &r)
		}
		return recs, nil
	})
	if err != nil {
		return itemErrors{}, 0, err
	}
	return itemErrors{Errs: rpcErrors(errs)}, index, nil
}

// ClientQuotas returns every entity's quota, sorted by entity, and their
// version (the log index of the last change, 0 if none). The slice is
// shared and immutable: callers must not modify it or its values.
func (c *Controller) ClientQuotas() ([]metadata.ClientQuota, uint64) {
	v := c.sec.Load()
	if v == nil {
		return nil, 0
	}
	return v.quotas, v.quotaVersion
}

// AlterClientQuotas sets and removes quota values, answering one error (or
// nil) per alteration: an entity Kafka refuses (metadata.CanonicalQuotaEntity),
// a key twice in one alteration, a key not valid for the entity or a
// value out of range (metadata.ValidateQuotaValue) fail that alteration,
// whose values are then left as they were. With validateOnly nothing
// changes.
func (c *Controller) AlterClientQuotas(ctx context.Context, alts []metadata.ClientQuotaAlteration, validateOnly bool) []error {
	errs := make([]error, len(alts))
	var a quotaArgs
	var at []int
	seen := map[string]bool{}
	for i, alt := range alts {
		qa, err := checkQuotaAlteration(alt.Entity, alt.Ops)
		if err != nil {
			errs[i] = err
			continue
		}
		if k := metadata.QuotaEntityKey(qa.Entity); seen[k] {
			errs[i] = fmt.Errorf("%w: ignoring duplicate entity %s", metadata.ErrInvalidRequest, k)
			continue
		} else {
			seen[k] = true
		}
		a.Alterations = append(a.Alterations, qa)
		at = append(at, i)
	}
	if validateOnly || len(at) == 0 {
		return errs
	}
	res, index, err := route(c, ctx, rpcAlterClientQuotas, a, (*Controller).alterClientQuotasLocal)
	c.afterChange(ctx, "alter client quotas", index, false)
	res.spread(errs, at, err)
	return errs
}

// checkQuotaAlteration validates one alteration and returns it with its
// entity canonical. A removal is not checked against the entity's keys:
// removing what is not set changes nothing, as in Kafka.
func checkQuotaAlteration(entity []metadata.QuotaEntityPart, ops []metadata.ClientQuotaOp) (quotaAlteration, error) {
	ent, err := metadata.CanonicalQuotaEntity(entity)
	if err != nil {
		return quotaAlteration{}, err
	}
	qa := quotaAlteration{Entity: ent}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return quotaAlteration{}, fmt.Errorf("%w: duplicate quota key %q; not updating quota for this entity", metadata.ErrInvalidRequest, op.Key)
		}
		seen[op.Key] = true
		if !op.Remove {
			if err := metadata.ValidateQuotaValue(ent, op.Key, op.Value); err != nil {
				return quotaAlteration{}, err
			}
		}
		qa.Ops = append(qa.Ops, quotaOp(op))
	}
	return qa, nil
}

func (c *Controller) alterClientQuotasLocal(ctx context.Context, a quotaArgs) (itemErrors, uint64, error) {
	errs := make([]error, len(a.Alterations))
	_, index, err := c.commit(ctx, "alter client quotas", func(st *state) ([]record, error) {
		var recs []record
		x := newTxn(st) // to check each alteration against the ones before it
		for i, alt := range a.Alterations {
			ops := make([]metadata.ClientQuotaOp, len(alt.Ops))
			for j, op := range alt.Ops {
				ops[j] = metadata.ClientQuotaOp(op)
			}
			qa, err := checkQuotaAlteration(alt.Entity, ops)
			if err != nil {
				errs[i] = err
				continue
			}
			// Only what changes is recorded: a value as it is, or the
			// removal of a value that is not set, writes nothing.
			cur, _ := x.quota(metadata.QuotaEntityKey(qa.Entity))
			var mine []record
			for _, op := range qa.Ops {
				old, set := cur.Values[op.Key]
				r := &clientQuotaRecord{Entity: qa.Entity, Key: op.Key}
				switch {
				case op.Remove && !set, !op.Remove && set && old == op.Value:
					continue
				case !op.Remove:
					v := op.Value
					r.Value = &v
				}
				mine = append(mine, r)
			}
			// Dry-run this alteration on top of the earlier ones: one
			// that cannot apply (the entity limit) fails alone.
			snapshot := cloneSecTxn(x.sec)
			var aerr error
			for _, r := range mine {
				if _, aerr = x.applySecurity(r); aerr != nil {
					break
				}
			}
			if aerr != nil {
				x.sec = snapshot
				errs[i] = aerr
				continue
			}
			recs = append(recs, mine...)
		}
		return recs, nil
	})
	if err != nil {
		return itemErrors{}, 0, err
	}
	return itemErrors{Errs: rpcErrors(errs)}, index, nil
}

func cloneSecTxn(s *secTxn) *secTxn {
	if s == nil {
		return nil
	}
	return &secTxn{acls: maps.Clone(s.acls), scram: maps.Clone(s.scram), quotas: maps.Clone(s.quotas)}
}
