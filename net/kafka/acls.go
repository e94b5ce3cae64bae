package kafka

// The ACL admin APIs: DescribeAcls (29, v0-3), CreateAcls (30, v0-3) and
// DeleteAcls (31, v0-3), over the bindings the cluster metadata stores
// (SecurityMetadata). Validation is Kafka's (metadata.ValidateACLBinding,
// metadata.ValidateACLFilter): CreateAcls answers INVALID_REQUEST per
// creation for ANY/MATCH/UNKNOWN values, a principal not "Type:Name", an
// empty host or resource name, or a CLUSTER resource not named
// kafka-cluster; DeleteAcls answers INVALID_REQUEST per filter with an
// UNKNOWN value; DescribeAcls answers it for the whole request. Creating
// an existing binding succeeds and changes nothing. Versions 0 carry no
// pattern type: kmsg defaults it to LITERAL, as Kafka reads them.
// Authorization of these requests is not decided here.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
)

// SecurityMetadata is the security part of Metadata: ACL bindings, SCRAM
// credentials and client quotas, replicated by the controller.
type SecurityMetadata interface {
	// ACLs returns every binding (an immutable shared slice, sorted by
	// metadata.CompareACLBindings) and a version that changes with them.
	ACLs() (bindings []acl.Binding, version uint64)
	// CreateACLs answers one error (or nil) per binding.
	CreateACLs(ctx context.Context, bs []acl.Binding) []error
	// DeleteACLs answers, per filter, the bindings it deleted or an error.
	DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, []error)
	ScramCredential(user, mechanism string) (metadata.ScramCredential, bool)
	// ScramCredentials returns every credential, sorted by user, mechanism.
	ScramCredentials() []metadata.ScramCredential
	// AlterScramCredentials answers one error (or nil) per item: upserts,
	// then deletions.
	AlterScramCredentials(ctx context.Context, upserts []metadata.ScramCredential, deletions []metadata.ScramDeletion) []error
	// ClientQuotas returns every entity's quota (an immutable shared slice)
	// and a version that changes with them.
	ClientQuotas() ([]metadata.ClientQuota, uint64)
	// AlterClientQuotas answers one error (or nil) per alteration.
	AlterClientQuotas(ctx context.Context, alts []metadata.ClientQuotaAlteration, validateOnly bool) []error
}

// securityErrors map the security metadata's sentinels to Kafka codes
// (the rest go through errorMap).
var securityErrors = []struct {
	err  error
	kerr *kerr.Error
}{
	{metadata.ErrResourceNotFound, kerr.ResourceNotFound},
	{metadata.ErrUnsupportedSaslMechanism, kerr.UnsupportedSaslMechanism},
	{metadata.ErrUnacceptableCredential, kerr.UnacceptableCredential},
	{metadata.ErrDuplicateResource, kerr.DuplicateResource},
}

// securityErrCode is errCode knowing the security sentinels.
func (c *conn) securityErrCode(err error) int16 {
	for _, m := range securityErrors {
		if errors.Is(err, m.err) {
			return m.kerr.Code
		}
	}
	return c.errCode(err)
}

func (c *conn) handleDescribeAcls(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{ResourceType: acl.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: acl.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType)}
	if err := metadata.ValidateACLFilter(f); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, errMessage(err)
		return resp, nil
	}
	bindings, _ := c.s.meta.ACLs()
	var cur *kmsg.DescribeACLsResponseResource
	for _, b := range bindings {
		if !metadata.ACLFilterMatches(f, b) {
			continue
		}
		// bindings are sorted by resource: a resource's are adjacent.
		if cur == nil || cur.ResourceType != kmsg.ACLResourceType(b.ResourceType) || cur.ResourceName != b.ResourceName ||
			cur.ResourcePatternType != kmsg.ACLResourcePatternType(b.PatternType) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			resp.Resources = append(resp.Resources, res)
			cur = &resp.Resources[len(resp.Resources)-1]
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host = b.Principal, b.Host
		a.Operation, a.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		cur.ACLs = append(cur.ACLs, a)
	}
	return resp, nil
}

func (c *conn) handleCreateAcls(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	bs := make([]acl.Binding, len(req.Creations))
	for i, cr := range req.Creations {
		bs[i] = acl.Binding{ResourceType: acl.ResourceType(cr.ResourceType), ResourceName: cr.ResourceName,
			PatternType: acl.PatternType(cr.ResourcePatternType), Principal: cr.Principal, Host: cr.Host,
			Operation: acl.Operation(cr.Operation), Permission: acl.Permission(cr.PermissionType)}
	}
	var errs []error
	if len(bs) > 0 {
		ctx, cancel := c.adminCtx(0)
		errs = c.s.meta.CreateACLs(ctx, bs)
		cancel()
	}
	for i := range bs {
		res := kmsg.NewCreateACLsResponseResult()
		if i < len(errs) && errs[i] != nil {
			res.ErrorCode, res.ErrorMessage = c.securityErrCode(errs[i]), errMessage(errs[i])
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func (c *conn) handleDeleteAcls(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	fs := make([]acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		fs[i] = acl.Filter{ResourceType: acl.ResourceType(f.ResourceType), ResourceName: f.ResourceName,
			PatternType: acl.PatternType(f.ResourcePatternType), Principal: f.Principal, Host: f.Host,
			Operation: acl.Operation(f.Operation), Permission: acl.Permission(f.PermissionType)}
	}
	var (
		deleted [][]acl.Binding
		errs    []error
	)
	if len(fs) > 0 {
		ctx, cancel := c.adminCtx(0)
		deleted, errs = c.s.meta.DeleteACLs(ctx, fs)
		cancel()
	}
	for i := range fs {
		res := kmsg.NewDeleteACLsResponseResult()
		if i < len(errs) && errs[i] != nil {
			res.ErrorCode, res.ErrorMessage = c.securityErrCode(errs[i]), errMessage(errs[i])
		} else if i < len(deleted) {
			for _, b := range deleted[i] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
				m.Principal, m.Host = b.Principal, b.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
