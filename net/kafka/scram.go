package kafka

// The SCRAM user APIs: DescribeUserScramCredentials (50, v0) and
// AlterUserScramCredentials (51, v0), with Kafka's per-user results:
// mechanism codes 1 (SCRAM-SHA-256) and 2 (SCRAM-SHA-512), anything else
// UNSUPPORTED_SASL_MECHANISM; a user named twice in one request is
// DUPLICATE_RESOURCE for every item naming it; 4096 to 16384 iterations
// and a non-empty user, salt and salted password, else
// UNACCEPTABLE_CREDENTIAL; describing a user without credentials or
// deleting a credential that does not exist is RESOURCE_NOT_FOUND. The
// broker keeps only StoredKey and ServerKey derived from the salted
// password (metadata.NewScramCredential); neither they nor the salted
// password are ever logged or answered. Alter answers once per user, as
// Kafka does (the users of deletions first): the first error among the
// user's items, or success. Authorization is not decided here.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// scramMechanisms are Kafka's ScramMechanism codes.
var scramMechanisms = map[int8]string{1: metadata.ScramSHA256, 2: metadata.ScramSHA512}

func scramMechanismCode(name string) int8 {
	for code, n := range scramMechanisms {
		if n == name {
			return code
		}
	}
	return 0
}

// scramMechanismName is a code's mechanism, or a name no credential has
// (which the controller refuses as unsupported).
func scramMechanismName(code int8) string {
	if n, ok := scramMechanisms[code]; ok {
		return n
	}
	return fmt.Sprintf("UNKNOWN(%d)", code)
}

func (c *conn) handleDescribeUserScramCredentials(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	all := c.s.meta.ScramCredentials()
	byUser := map[string][]metadata.ScramCredential{}
	var users []string
	for _, cr := range all {
		if _, ok := byUser[cr.User]; !ok {
			users = append(users, cr.User)
		}
		byUser[cr.User] = append(byUser[cr.User], cr)
	}
	count := map[string]int{}
	if len(req.Users) > 0 { // none (or null): every user
		users = users[:0]
		for _, u := range req.Users {
			if count[u.Name] == 0 {
				users = append(users, u.Name)
			}
			count[u.Name]++
		}
	}
	for _, u := range users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		creds := byUser[u]
		switch {
		case count[u] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = errMessage(fmt.Errorf("cannot describe SCRAM credentials for the same user twice in a single request: %s", u))
		case len(creds) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = errMessage(fmt.Errorf("attempt to describe a user credential that does not exist: %s", u))
		default:
			for _, cr := range creds {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = scramMechanismCode(cr.Mechanism), cr.Iterations
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func (c *conn) handleAlterUserScramCredentials(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	count := map[string]int{}
	for _, d := range req.Deletions {
		count[d.Name]++
	}
	for _, u := range req.Upsertions {
		count[u.Name]++
	}
	upsertErrs := make([]error, len(req.Upsertions))
	var upserts []metadata.ScramCredential
	var upsertAt []int
	for i, u := range req.Upsertions {
		cred, err := scramUpsert(u)
		if err != nil {
			if count[u.Name] <= 1 {
				upsertErrs[i] = err
				continue
			}
			// A duplicate: the controller refuses it as one, which Kafka
			// checks first.
			cred = metadata.ScramCredential{User: u.Name, Mechanism: scramMechanismName(u.Mechanism)}
		}
		upserts = append(upserts, cred)
		upsertAt = append(upsertAt, i)
	}
	deletions := make([]metadata.ScramDeletion, len(req.Deletions))
	for i, d := range req.Deletions {
		deletions[i] = metadata.ScramDeletion{User: d.Name, Mechanism: scramMechanismName(d.Mechanism)}
	}
	var errs []error
	if len(upserts)+len(deletions) > 0 {
		ctx, cancel := c.adminCtx(0)
		errs = c.s.meta.AlterScramCredentials(ctx, upserts, deletions)
		cancel()
	}
	// Kafka answers once per user, deletions' users first: the first
	// error among the user's items, or success.
	var users []string
	userErr := map[string]error{}
	note := func(user string, err error) {
		if _, seen := userErr[user]; !seen {
			users = append(users, user)
			userErr[user] = err
		} else if userErr[user] == nil {
			userErr[user] = err
		}
	}
	for i, d := range req.Deletions {
		var err error
		if j := len(upserts) + i; j < len(errs) {
			err = errs[j]
		}
		note(d.Name, err)
	}
	for j, i := range upsertAt {
		if j < len(errs) {
			upsertErrs[i] = errs[j]
		}
	}
	for i, u := range req.Upsertions {
		note(u.Name, upsertErrs[i])
	}
	for _, user := range users {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		if err := userErr[user]; err != nil {
			res.ErrorCode, res.ErrorMessage = c.securityErrCode(err), errMessage(err)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// scramUpsert derives the credential to store from an upsertion, checking
// what Kafka checks first.
func scramUpsert(u kmsg.AlterUserSCRAMCredentialsRequestUpsertion) (metadata.ScramCredential, error) {
	mech, ok := scramMechanisms[u.Mechanism]
	switch {
	case u.Name == "":
		return metadata.ScramCredential{}, fmt.Errorf("%w: username must not be empty", metadata.ErrUnacceptableCredential)
	case !ok:
		return metadata.ScramCredential{}, fmt.Errorf("%w: mechanism code %d", metadata.ErrUnsupportedSaslMechanism, u.Mechanism)
	case u.Iterations < metadata.MinScramIterations:
		return metadata.ScramCredential{}, fmt.Errorf("%w: too few iterations (%d; at least %d)", metadata.ErrUnacceptableCredential, u.Iterations, metadata.MinScramIterations)
	case u.Iterations > metadata.MaxScramIterations:
		return metadata.ScramCredential{}, fmt.Errorf("%w: too many iterations (%d; at most %d)", metadata.ErrUnacceptableCredential, u.Iterations, metadata.MaxScramIterations)
	case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
		return metadata.ScramCredential{}, fmt.Errorf("%w: empty salt or salted password", metadata.ErrUnacceptableCredential)
	}
	cred, err := metadata.NewScramCredential(u.Name, mech, u.Salt, u.SaltedPassword, u.Iterations)
	if err != nil {
		return metadata.ScramCredential{}, fmt.Errorf("%w: %v", metadata.ErrUnacceptableCredential, err)
	}
	return cred, nil
}
