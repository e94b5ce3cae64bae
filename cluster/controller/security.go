package controller

// The security metadata: ACL bindings, SCRAM credentials and client
// quotas, replicated as records in the Raft log like KRaft's
// AccessControlEntryRecord, UserScramCredentialRecord and
// ClientQuotaRecord, persisted in the FSM state beside the topics (so FSM
// snapshots carry them) and validated as Kafka's AclControlManager,
// ScramControlManager and ClientQuotaControlManager validate them.
//
// Readers call ACLs and ClientQuotas on every connection or request: they
// get an immutable slice the FSM replaces (copy on write) when an entry
// changes it, and a version that is the log index of that entry (0: never
// changed), so a cache keyed by version is rebuilt only on a change.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/meta"
)

// Record types of the security metadata. Stored in the Raft log forever:
// never rename one.
const (
	recTypeACL                = "acl"
	recTypeRemoveACL          = "remove_acl"
	recTypeScramCredential    = "scram_credential"
	recTypeRemoveScramCredent = "remove_scram_credential"
	recTypeClientQuota        = "client_quota"
)

// Keys of the security state in meta.
const (
	stateKeyACL   = "acl/"
	stateKeyScram = "scram/"
	stateKeyQuota = "quota/"
)

// aclRecord creates one ACL binding (KRaft AccessControlEntryRecord). An
// existing identical binding makes it a no-op.
type aclRecord struct {
	Binding acl.Binding `json:"binding"`
}

// removeACLRecord deletes one existing binding (KRaft
// RemoveAccessControlEntryRecord).
type removeACLRecord struct {
	Binding acl.Binding `json:"binding"`
}

// scramCredentialRecord creates or replaces a user's credential for one
// mechanism (KRaft UserScramCredentialRecord): the salted keys, never the
// password.
type scramCredentialRecord struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int32  `json:"iterations"`
}

// removeScramCredentialRecord deletes an existing credential (KRaft
// RemoveUserScramCredentialRecord).
type removeScramCredentialRecord struct {
	User      string `json:"user"`
	Mechanism string `json:"mechanism"`
}

// clientQuotaRecord sets (Value non-nil) or removes (nil) one quota value
// of an entity (KRaft ClientQuotaRecord). An entity left without values
// no longer exists.
type clientQuotaRecord struct {
	Entity []metadata.QuotaEntityPart `json:"entity"`
	Key    string                     `json:"key"`
	Value  *float64                   `json:"value,omitempty"`
}

func (*aclRecord) recordType() string                   { return recTypeACL }
func (*removeACLRecord) recordType() string             { return recTypeRemoveACL }
func (*scramCredentialRecord) recordType() string       { return recTypeScramCredential }
func (*removeScramCredentialRecord) recordType() string { return recTypeRemoveScramCredent }
func (*clientQuotaRecord) recordType() string           { return recTypeClientQuota }

// newSecurityRecord is newRecord for the security record types.
func newSecurityRecord(typ string) record {
	switch typ {
	case recTypeACL:
		return &aclRecord{}
	case recTypeRemoveACL:
		return &removeACLRecord{}
	case recTypeScramCredential:
		return &scramCredentialRecord{}
	case recTypeRemoveScramCredent:
		return &removeScramCredentialRecord{}
	case recTypeClientQuota:
		return &clientQuotaRecord{}
	}
	return nil
}

// scramKey identifies a credential.
type scramKey struct{ user, mechanism string }

func (k scramKey) stateKey() string { return stateKeyScram + k.user + "\x00" + k.mechanism }

// securityState is the security part of the FSM state. acls and
// quotaList are never modified in place: a change publishes new slices.
type securityState struct {
	acls         []acl.Binding // sorted by metadata.CompareACLBindings
	aclSet       map[acl.Binding]struct{}
	aclVersion   uint64
	scram        map[scramKey]metadata.ScramCredential
	quotas       map[string]metadata.ClientQuota // by metadata.QuotaEntityKey
	quotaList    []metadata.ClientQuota          // sorted by entity key
	quotaVersion uint64
}

func newSecurityState() securityState {
	return securityState{aclSet: map[acl.Binding]struct{}{}, scram: map[scramKey]metadata.ScramCredential{},
		quotas: map[string]metadata.ClientQuota{}}
}

// secTxn is a txn's view of the security changes of one entry.
type secTxn struct {
	acls   map[acl.Binding]bool                   // true: added, false: removed
	scram  map[scramKey]*metadata.ScramCredential // nil: removed
	quotas map[string]*metadata.ClientQuota       // nil: removed
}

func (x *txn) security() *secTxn {
	if x.sec == nil {
		x.sec = &secTxn{acls: map[acl.Binding]bool{}, scram: map[scramKey]*metadata.ScramCredential{},
			quotas: map[string]*metadata.ClientQuota{}}
	}
	return x.sec
}

func (x *txn) hasACL(b acl.Binding) bool {
	if x.sec != nil {
		if added, ok := x.sec.acls[b]; ok {
			return added
		}
	}
	_, ok := x.st.sec.aclSet[b]
	return ok
}

func (x *txn) aclCount() int {
	n := len(x.st.sec.aclSet)
	if x.sec != nil {
		for b, added := range x.sec.acls {
			_, had := x.st.sec.aclSet[b]
			switch {
			case added && !had:
				n++
			case !added && had:
				n--
			}
		}
	}
	return n
}

func (x *txn) scramCredential(k scramKey) (metadata.ScramCredential, bool) {
	if x.sec != nil {
		if c, ok := x.sec.scram[k]; ok {
			if c == nil {
				return metadata.ScramCredential{}, false
			}
			return *c, true
		}
	}
	c, ok := x.st.sec.scram[k]
	return c, ok
}

func (x *txn) quota(key string) (metadata.ClientQuota, bool) {
	if x.sec != nil {
		if q, ok := x.sec.quotas[key]; ok {
			if q == nil {
				return metadata.ClientQuota{}, false
			}
			return *q, true
		}
	}
	q, ok := x.st.sec.quotas[key]
	return q, ok
}

// applySecurity applies a security record; handled is false for other
// record types.
func (x *txn) applySecurity(r record) (handled bool, err error) {
	switch r := r.(type) {
	case *aclRecord:
		if err := metadata.ValidateACLBinding(r.Binding); err != nil {
			return true, err
		}
		if x.hasACL(r.Binding) {
			return true, nil
		}
		if x.aclCount() >= metadata.MaxACLs {
			return true, fmt.Errorf("%w: the cluster holds %d ACLs, the limit", metadata.ErrInvalidRequest, metadata.MaxACLs)
		}
		x.security().acls[r.Binding] = true

	case *removeACLRecord:
		if !x.hasACL(r.Binding) {
			return true, fmt.Errorf("%w: ACL to remove does not exist (concurrent change?)", metadata.ErrInvalidRequest)
		}
		x.security().acls[r.Binding] = false

	case *scramCredentialRecord:
		c := metadata.ScramCredential{User: r.User, Mechanism: r.Mechanism, Salt: r.Salt, StoredKey: r.StoredKey,
			ServerKey: r.ServerKey, Iterations: r.Iterations}
		if err := validateScramCredential(c); err != nil {
			return true, err
		}
		x.security().scram[scramKey{r.User, r.Mechanism}] = &c

	case *removeScramCredentialRecord:
		k := scramKey{r.User, r.Mechanism}
		if _, ok := x.scramCredential(k); !ok {
			return true, fmt.Errorf("%w: no %s credential of user %q", metadata.ErrResourceNotFound, r.Mechanism, r.User)
		}
		x.security().scram[k] = nil

	case *clientQuotaRecord:
		entity, err := metadata.CanonicalQuotaEntity(r.Entity)
		if err != nil {
			return true, err
		}
		key := metadata.QuotaEntityKey(entity)
		q, ok := x.quota(key)
		if ok {
			q = q.Clone()
		} else {
			q = metadata.ClientQuota{Entity: entity, Values: map[string]float64{}}
		}
		if r.Value == nil {
			delete(q.Values, r.Key)
		} else {
			if err := metadata.ValidateQuotaValue(entity, r.Key, *r.Value); err != nil {
				return true, err
			}
			if !ok && x.quotaCount() >= metadata.MaxQuotaEntities {
				return true, fmt.Errorf("%w: the cluster holds %d client quota entities, the limit", metadata.ErrInvalidRequest, metadata.MaxQuotaEntities)
			}
			q.Values[r.Key] = *r.Value
		}
		if len(q.Values) == 0 {
			x.security().quotas[key] = nil
		} else {
			x.security().quotas[key] = &q
		}

	default:
		return false, nil
	}
	return true, nil
}

func (x *txn) quotaCount() int {
	n := len(x.st.sec.quotas)
	if x.sec != nil {
		for k, q := range x.sec.quotas {
			_, had := x.st.sec.quotas[k]
			switch {
			case q != nil && !had:
				n++
			case q == nil && had:
				n--
			}
		}
	}
	return n
}

// validateScramCredential checks a credential to store as Kafka's
// ScramControlManager does.
func validateScramCredential(c metadata.ScramCredential) error {
	h := metadata.ScramHash(c.Mechanism)
	switch {
	case c.User == "":
		return fmt.Errorf("%w: username must not be empty", metadata.ErrUnacceptableCredential)
	case h == nil:
		return fmt.Errorf("%w: %q (want %s or %s)", metadata.ErrUnsupportedSaslMechanism, c.Mechanism, metadata.ScramSHA256, metadata.ScramSHA512)
	case c.Iterations < metadata.MinScramIterations:
		return fmt.Errorf("%w: too few iterations (%d; at least %d)", metadata.ErrUnacceptableCredential, c.Iterations, metadata.MinScramIterations)
	case c.Iterations > metadata.MaxScramIterations:
		return fmt.Errorf("%w: too many iterations (%d; at most %d)", metadata.ErrUnacceptableCredential, c.Iterations, metadata.MaxScramIterations)
	case len(c.Salt) == 0 || len(c.Salt) > 1024:
		return fmt.Errorf("%w: a salt of %d bytes (want 1 to 1024)", metadata.ErrUnacceptableCredential, len(c.Salt))
	case len(c.StoredKey) != h().Size() || len(c.ServerKey) != h().Size():
		return fmt.Errorf("%w: keys of %d and %d bytes (want %d)", metadata.ErrUnacceptableCredential, len(c.StoredKey), len(c.ServerKey), h().Size())
	}
	return nil
}

// writeSecurity adds the entry's security changes to b.
func (s *secTxn) write(b *meta.StateBatch) error {
	for bd, added := range s.acls {
		k, err := aclStateKey(bd)
		if err != nil {
			return err
		}
		if !added {
			b.Delete(k)
			continue
		}
		b.Set(k, k[len(stateKeyACL):])
	}
	for k, c := range s.scram {
		if c == nil {
			b.Delete([]byte(k.stateKey()))
			continue
		}
		v, err := json.Marshal(scramCredentialRecord{User: c.User, Mechanism: c.Mechanism, Salt: c.Salt,
			StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
		if err != nil {
			return fmt.Errorf("encode scram credential: %w", err)
		}
		b.Set([]byte(k.stateKey()), v)
	}
	for k, q := range s.quotas {
		if q == nil {
			b.Delete([]byte(stateKeyQuota + k))
			continue
		}
		v, err := json.Marshal(q)
		if err != nil {
			return fmt.Errorf("encode client quota: %w", err)
		}
		b.Set([]byte(stateKeyQuota+k), v)
	}
	return nil
}

// aclStateKey is a binding's key in the state: its JSON, which is
// canonical (fixed field order) and also the value.
func aclStateKey(b acl.Binding) ([]byte, error) {
	js, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode acl: %w", err)
	}
	return append([]byte(stateKeyACL), js...), nil
}

// mutate applies the changes to st (write lock held); index is the
// entry's, the new version of what changed.
func (s *secTxn) mutate(st *securityState, index uint64) {
	if len(s.acls) > 0 {
		for b, added := range s.acls {
			if added {
				st.aclSet[b] = struct{}{}
			} else {
				delete(st.aclSet, b)
			}
		}
		st.acls = sortedACLs(st.aclSet)
		st.aclVersion = index
	}
	for k, c := range s.scram {
		if c == nil {
			delete(st.scram, k)
		} else {
			st.scram[k] = *c
		}
	}
	if len(s.quotas) > 0 {
		for k, q := range s.quotas {
			if q == nil {
				delete(st.quotas, k)
			} else {
				st.quotas[k] = *q
			}
		}
		st.quotaList = sortedQuotas(st.quotas)
		st.quotaVersion = index
	}
}

func sortedACLs(set map[acl.Binding]struct{}) []acl.Binding {
	out := slices.Collect(maps.Keys(set))
	slices.SortFunc(out, metadata.CompareACLBindings)
	return out
}

func sortedQuotas(m map[string]metadata.ClientQuota) []metadata.ClientQuota {
	out := make([]metadata.ClientQuota, 0, len(m))
	for _, k := range sortedNames(m) {
		out = append(out, m[k])
	}
	return out
}

// loadSecurity reads the security state from db.
func loadSecurity(db *meta.DB, st *state) error {
	s := newSecurityState()
	err := db.ScanState([]byte(stateKeyACL), func(k, v []byte) error {
		var b acl.Binding
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("%w: acl %q: %v", meta.ErrCorrupt, k, err)
		}
		s.aclSet[b] = struct{}{}
		return nil
	})
	if err != nil {
		return err
	}
	err = db.ScanState([]byte(stateKeyScram), func(k, v []byte) error {
		var r scramCredentialRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("%w: scram credential: %v", meta.ErrCorrupt, err)
		}
		key := scramKey{r.User, r.Mechanism}
		if key.stateKey() != stateKeyScram+string(k) {
			return fmt.Errorf("%w: scram credential record under the wrong key", meta.ErrCorrupt)
		}
		s.scram[key] = metadata.ScramCredential{User: r.User, Mechanism: r.Mechanism, Salt: r.Salt,
			StoredKey: r.StoredKey, ServerKey: r.ServerKey, Iterations: r.Iterations}
		return nil
	})
	if err != nil {
		return err
	}
	err = db.ScanState([]byte(stateKeyQuota), func(k, v []byte) error {
		var q metadata.ClientQuota
		if err := json.Unmarshal(v, &q); err != nil {
			return fmt.Errorf("%w: client quota %q: %v", meta.ErrCorrupt, k, err)
		}
		if metadata.QuotaEntityKey(q.Entity) != string(k) {
			return fmt.Errorf("%w: client quota record %q holds another entity", meta.ErrCorrupt, k)
		}
		s.quotas[string(k)] = q
		return nil
	})
	if err != nil {
		return err
	}
	s.acls = sortedACLs(s.aclSet)
	s.quotaList = sortedQuotas(s.quotas)
	// The versions of a loaded state: the applied index, newer than any
	// version published before (a restore replaces everything).
	s.aclVersion, s.quotaVersion = st.applied, st.applied
	st.sec = s
	return nil
}
