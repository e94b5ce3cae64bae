package kafka

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler runs the synchronous part of a request on the connection's read
// loop. It returns the response, or a park function that finishes the
// request off the read loop (waiting for fsync, long-poll) and returns the
// response then. A nil response and nil park means "no response" (acks=0).
type handler func(c *conn, r *request) (resp kmsg.Response, park func() kmsg.Response)

type api struct {
	min, max int16
	handle   handler
}

// txnAPIs are the transaction APIs: a server without a transaction
// coordinator (Options.Txns) neither advertises nor serves them, so a client
// learns from ApiVersions that transactions are unavailable instead of
// failing half-way through one.
var txnAPIs = map[int16]bool{
	kmsg.AddPartitionsToTxn.Int16():   true,
	kmsg.AddOffsetsToTxn.Int16():      true,
	kmsg.EndTxn.Int16():               true,
	kmsg.DescribeTransactions.Int16(): true,
	kmsg.ListTransactions.Int16():     true,
	kmsg.TxnOffsetCommit.Int16():      true,
	kmsg.WriteTxnMarkers.Int16():      true,
}

// apis is the table of supported requests. ApiVersions is derived from it,
// so advertising and handling cannot drift apart. Version floors are where
// the request first uses RecordBatch v2 (Produce v3, Fetch v4) or where
// older shapes are not worth carrying (ListOffsets v0).
var apis map[int16]api

func init() {
	apis = map[int16]api{
		kmsg.Produce.Int16():                 {3, 12, (*conn).handleProduce},
		kmsg.Fetch.Int16():                   {4, 12, (*conn).handleFetch},
		kmsg.ListOffsets.Int16():             {1, 8, (*conn).handleListOffsets},
		kmsg.Metadata.Int16():                {0, 12, (*conn).handleMetadata},
		kmsg.ApiVersions.Int16():             {0, 5, (*conn).handleApiVersions},
		kmsg.CreateTopics.Int16():            {0, 7, (*conn).handleCreateTopics},
		kmsg.DeleteTopics.Int16():            {0, 6, (*conn).handleDeleteTopics},
		kmsg.DeleteRecords.Int16():           {0, 2, (*conn).handleDeleteRecords},
		kmsg.InitProducerID.Int16():          {0, 5, (*conn).handleInitProducerID},
		kmsg.DescribeConfigs.Int16():         {0, 4, (*conn).handleDescribeConfigs},
		kmsg.AlterConfigs.Int16():            {0, 2, (*conn).handleAlterConfigs},
		kmsg.CreatePartitions.Int16():        {0, 3, (*conn).handleCreatePartitions},
		kmsg.IncrementalAlterConfigs.Int16(): {0, 1, (*conn).handleIncrementalAlterConfigs},
		kmsg.DescribeCluster.Int16():         {0, 1, (*conn).handleDescribeCluster},
		kmsg.DescribeLogDirs.Int16():         {0, 4, (*conn).handleDescribeLogDirs},

		// SASL (sasl.go). Advertised on every listener, as Kafka does;
		// outside a SASL exchange they answer ILLEGAL_SASL_STATE.
		kmsg.SASLHandshake.Int16():        {0, 1, (*conn).handleSaslHandshake},
		kmsg.SASLAuthenticate.Int16():     {0, 2, (*conn).handleSaslAuthenticate},
		kmsg.OffsetForLeaderEpoch.Int16(): {0, 4, (*conn).handleOffsetForLeaderEpoch},

		// Transactions (txn.go).
		kmsg.AddPartitionsToTxn.Int16():   {0, 5, (*conn).handleAddPartitionsToTxn},
		kmsg.AddOffsetsToTxn.Int16():      {0, 4, (*conn).handleAddOffsetsToTxn},
		kmsg.EndTxn.Int16():               {0, 5, (*conn).handleEndTxn},
		kmsg.DescribeTransactions.Int16(): {0, 0, (*conn).handleDescribeTransactions},
		kmsg.ListTransactions.Int16():     {0, 1, (*conn).handleListTransactions},
		kmsg.TxnOffsetCommit.Int16():      {0, 5, (*conn).handleTxnOffsetCommit},
		kmsg.WriteTxnMarkers.Int16():      {0, 2, (*conn).handleWriteTxnMarkers},
		kmsg.DescribeProducers.Int16():    {0, 0, (*conn).handleDescribeProducers},

		// Consumer groups (group_*.go).
		kmsg.FindCoordinator.Int16():        {0, 5, (*conn).handleFindCoordinator},
		kmsg.JoinGroup.Int16():              {0, 9, (*conn).handleJoinGroup},
		kmsg.SyncGroup.Int16():              {0, 5, (*conn).handleSyncGroup},
		kmsg.Heartbeat.Int16():              {0, 4, (*conn).handleHeartbeat},
		kmsg.LeaveGroup.Int16():             {0, 5, (*conn).handleLeaveGroup},
		kmsg.OffsetCommit.Int16():           {0, 9, (*conn).handleOffsetCommit},
		kmsg.OffsetFetch.Int16():            {0, 9, (*conn).handleOffsetFetch},
		kmsg.OffsetDelete.Int16():           {0, 0, (*conn).handleOffsetDelete},
		kmsg.ListGroups.Int16():             {0, 5, (*conn).handleListGroups},
		kmsg.DescribeGroups.Int16():         {0, 6, (*conn).handleDescribeGroups},
		kmsg.DeleteGroups.Int16():           {0, 2, (*conn).handleDeleteGroups},
		kmsg.ConsumerGroupHeartbeat.Int16(): {0, 1, (*conn).handleConsumerGroupHeartbeat},
		kmsg.ConsumerGroupDescribe.Int16():  {0, 1, (*conn).handleConsumerGroupDescribe},

		// Security metadata (acls.go, scram.go, quotas.go).
		kmsg.DescribeACLs.Int16():                 {0, 3, (*conn).handleDescribeAcls},
		kmsg.CreateACLs.Int16():                   {0, 3, (*conn).handleCreateAcls},
		kmsg.DeleteACLs.Int16():                   {0, 3, (*conn).handleDeleteAcls},
		kmsg.DescribeClientQuotas.Int16():         {0, 1, (*conn).handleDescribeClientQuotas},
		kmsg.AlterClientQuotas.Int16():            {0, 1, (*conn).handleAlterClientQuotas},
		kmsg.DescribeUserSCRAMCredentials.Int16(): {0, 0, (*conn).handleDescribeUserScramCredentials},
		kmsg.AlterUserSCRAMCredentials.Int16():    {0, 0, (*conn).handleAlterUserScramCredentials},
	}
}

func supported(key, version int16) bool {
	a, ok := apis[key]
	return ok && version >= a.min && version <= a.max
}

// tv2Versions are the versions of KIP-890 part 2 (transaction version 2):
// a server whose transaction version is below 2 offers only those below
// (Produce v12 adds the partition implicitly, TxnOffsetCommit v5 the
// offsets partition, EndTxn v5 bumps the epoch, AddPartitionsToTxn v5 is
// a leader's implicit add).
var tv2Versions = map[int16]int16{
	kmsg.Produce.Int16():            12,
	kmsg.TxnOffsetCommit.Int16():    5,
	kmsg.EndTxn.Int16():             5,
	kmsg.AddPartitionsToTxn.Int16(): 5,
}

// maxVersion is the highest version of key this server offers: -1 for an
// API it does not serve (a transaction API without a coordinator).
func (s *Server) maxVersion(key int16) int16 {
	a, ok := apis[key]
	switch {
	case !ok, txnAPIs[key] && s.opts.Txns == nil:
		return -1
	}
	if v, ok := tv2Versions[key]; ok && s.opts.TransactionVersion < 2 {
		return min(a.max, v-1)
	}
	return a.max
}

// offers reports whether this server serves version of the API.
func (s *Server) offers(key, version int16) bool {
	return version <= s.maxVersion(key)
}

// apiVersionKeys lists the APIs this server offers for ApiVersions, sorted
// by key. It is computed once per server (the table never changes after
// init); responses share it, as they are only encoded.
func (s *Server) apiVersionKeys() []kmsg.ApiVersionsResponseApiKey {
	s.apiKeysOnce.Do(func() {
		keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
		for k, a := range apis {
			if max := s.maxVersion(k); max >= a.min {
				keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: max})
			}
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
		s.apiKeys = keys
	})
	return s.apiKeys
}

// transactionVersionFeature is the feature flag of KIP-890 part 2
// clients read from ApiVersions v3+ to choose the transaction protocol.
const transactionVersionFeature = "transaction.version"

// setFeatures fills the features of an ApiVersions v3+ answer: the
// transaction version this broker supports and the one in force (a fixed
// setting here, so its epoch never changes).
func (s *Server) setFeatures(resp *kmsg.ApiVersionsResponse) {
	if s.opts.Txns == nil {
		return
	}
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, 2
	resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, s.opts.TransactionVersion, s.opts.TransactionVersion
	resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	resp.FinalizedFeaturesEpoch = 0
}

// dispatch runs one request and arranges for its reply to fill its entry in
// the outbox. A handler panic is a bug, but it must cost only the connection
// it came on: it is logged with its stack and the connection is closed.
func (c *conn) dispatch(r *request) {
	if r.kreq == nil || !c.s.offers(r.key, r.version) {
		c.s.budget.release(r.size)
		c.out.fill(r.entry, c.unsupported(r))
		return
	}
	var (
		resp kmsg.Response
		park func() kmsg.Response
	)
	ok := c.guard(r, func() {
		if c.measureHandler() {
			start := time.Now()
			defer func() { r.handlerTime = time.Since(start) }()
		}
		if resp = c.clusterGate(r); resp == nil { // authz.go: the APIs wholly gated by a cluster operation
			resp, park = apis[r.key].handle(c, r)
		}
	})
	if !ok || park == nil {
		if r.later {
			return // the answer function fills the entry and releases the budget
		}
		c.s.budget.release(r.size)
		if ok {
			// Quotas are applied here for an answer made on the read loop
			// (acks=0 produces included), so a throttle mutes the
			// connection before its next request is read; answers made
			// elsewhere are recorded by the write loop.
			c.out.fill(r.entry, c.throttleReply(reply{req: r, resp: resp}))
		}
		return
	}
	c.s.parked.Add(1)
	c.s.parkedN.Add(1)
	go func() {
		defer c.s.parked.Done()
		defer c.s.parkedN.Add(-1)
		defer c.s.budget.release(r.size) // the decoded request lives until park returns
		c.guard(r, func() { c.out.fill(r.entry, reply{req: r, resp: park()}) })
	}()
}

// answerLater lets a handler answer from a callback rather than by returning
// the response or parking a goroutine: the handler returns (nil, nil) and
// the returned function, which must be called exactly once, from anywhere,
// fills the request's place in the reply order. Until then the request
// counts as parked (graceful shutdown waits for it) and its frame stays
// charged to the request memory budget (its records may still be
// referenced).
func (c *conn) answerLater(r *request) func(kmsg.Response) {
	r.later = true
	c.s.parked.Add(1)
	c.s.parkedN.Add(1)
	return func(resp kmsg.Response) {
		c.out.fill(r.entry, reply{req: r, resp: resp})
		c.s.budget.release(r.size)
		c.s.parkedN.Add(-1)
		c.s.parked.Done()
	}
}

// guard runs fn, turning a panic into a fatal reply for r. It reports
// whether fn completed.
func (c *conn) guard(r *request, fn func()) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("handler panic", "peer", c.peer, "api", kmsg.NameForKey(r.key), "panic", p, "stack", string(debug.Stack()))
			if !c.out.fill(r.entry, reply{req: r, fatal: fmt.Errorf("internal error handling %s", kmsg.NameForKey(r.key))}) {
				// Already answered (from a callback) before the panic: the
				// fatal reply cannot take its place, so close directly.
				c.cancel()
				c.nc.Close()
			}
			ok = false
		}
	}()
	fn()
	return true
}

// unsupported answers a request whose key or version MoonMQ does not serve.
// ApiVersions gets the v0 answer Kafka gives (UNSUPPORTED_VERSION plus our
// versions, so the client can retry with one we speak). Other requests get
// a body whose leading int16 is UNSUPPORTED_VERSION, which is the error code
// position of the simple responses; clients that negotiated versions never
// send these, so this only reaches hand-rolled or hostile peers.
func (c *conn) unsupported(r *request) reply {
	c.s.log.Debug("unsupported request", "peer", c.peer, "key", r.key, "version", r.version, "client_id", r.clientID)
	if r.key == kmsg.ApiVersions.Int16() {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = c.s.apiVersionKeys()
		return reply{req: r, resp: resp}
	}
	code := kerr.UnsupportedVersion.Code
	return reply{req: r, raw: []byte{byte(uint16(code) >> 8), byte(code)}}
}

// handleApiVersions serves ApiVersions v0–5. v3 adds the client's
// software name and version, which Kafka requires to match
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? (INVALID_REQUEST otherwise);
// v4 is v3 again (it only lets a SupportedFeatures minimum be 0, and
// MoonMQ advertises no features); v5 (KIP-1242) names the cluster and node
// the client means to reach: both or neither, and REBOOTSTRAP_REQUIRED if
// that is not this node, so a client sent here by stale metadata starts
// over from its seeds. A version above 5 is answered at v0 with
// UNSUPPORTED_VERSION and our range (unsupported).
func (c *conn) handleApiVersions(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareNamePattern.MatchString(req.ClientSoftwareName) ||
		!softwareNamePattern.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if req.Version >= 5 {
		named, numbered := req.ClusterID != nil, req.NodeID != -1
		switch {
		case named != numbered:
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		case named && (*req.ClusterID != c.s.meta.ClusterID() || req.NodeID != c.s.opts.NodeID):
			resp.ErrorCode = kerr.RebootstrapRequired.Code
			return resp, nil
		}
	}
	resp.ApiKeys = c.s.apiVersionKeys()
	if req.Version >= 3 {
		c.s.setFeatures(resp)
	}
	return resp, nil
}

// softwareNamePattern is what Kafka accepts as a client software name or
// version (ApiVersionsRequest.isValid).
var softwareNamePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)
