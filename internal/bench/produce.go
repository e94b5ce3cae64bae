package bench

import (
	"context"
	crand "crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/cli"
	"github.com/moonmq/moonmq/net/client"
)

const produceSynopsis = "produce --topic T [flags]"

// ProduceConfig configures a produce run. Zero fields take the flag
// defaults (see DefaultProduceConfig).
type ProduceConfig struct {
	Addr        string
	Topic       string
	Records     int64         // total records across producers
	Size        int           // value bytes per record
	Acks        string        // "all", "1" or "0"
	BatchBytes  int           // max bytes per partition batch
	Linger      time.Duration // how long a partition waits to fill a batch
	Producers   int           // concurrent producer clients
	Rate        float64       // total records/s, 0 = unlimited
	Partitions  int           // partitions for --create, 0 = broker default
	Replicas    int           // replication factor for --create, 0 = broker default
	Create      bool          // create the topic if missing
	Compression string        // none, lz4, zstd, snappy, gzip
	Output      string        // text or json
	ClientID    string
	Timeout     time.Duration // stop after this long, 0 = no limit
	// Security is TLS and SASL for every connection of the run.
	Security client.Security

	// Keys, when set, keys the records over a space of that many keys
	// (records.go), in KeyOrder (random or sequential); Tombstones is
	// the fraction of them sent with a null value.
	Keys       int64
	KeyOrder   string
	Tombstones float64
	// TopicConfigs are the configs of the topic Create makes.
	TopicConfigs map[string]string

	// Transactional produces in transactions of TransactionRecords
	// records, each producer under its own transactional ID (see
	// produce_txn.go); it requires Acks "all".
	Transactional      bool
	TransactionRecords int

	// ProgressInterval is the live progress period (1s from the CLI).
	ProgressInterval time.Duration

	flags *flag.FlagSet
}

// DefaultProduceConfig returns the CLI defaults.
func DefaultProduceConfig() ProduceConfig {
	return ProduceConfig{
		Addr:             cli.Addr(),
		Records:          100_000,
		Size:             100,
		Acks:             "all",
		BatchBytes:       1 << 20,
		Linger:           5 * time.Millisecond,
		Producers:        1,
		Compression:      "none",
		KeyOrder:         keyOrderRandom,
		Output:           "text",
		ClientID:         "moonmq-bench",
		ProgressInterval: time.Second,

		TransactionRecords: 1000,
	}
}

func parseProduce(args []string) (ProduceConfig, bool, error) {
	cfg := DefaultProduceConfig()
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	cfg.flags = fs
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, cli.AddrUsage)
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "`topic` to produce to (required)")
	fs.Int64Var(&cfg.Records, "records", cfg.Records, "total number of records (`N`)")
	fs.IntVar(&cfg.Size, "size", cfg.Size, "value size in `bytes` (random, incompressible)")
	fs.StringVar(&cfg.Acks, "acks", cfg.Acks, "acknowledgements: `all`, 1 or 0")
	fs.IntVar(&cfg.BatchBytes, "batch", cfg.BatchBytes, "max batch size in `bytes` per partition")
	fs.DurationVar(&cfg.Linger, "linger", cfg.Linger, "how long a partition waits to fill a batch (`duration`)")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "concurrent producer clients (`P`)")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "total `records/s` across producers, 0 = unlimited")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions when creating the topic (`N`), 0 = broker default")
	fs.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "replication factor when creating the topic (`N`), 0 = broker default")
	fs.BoolVar(&cfg.Create, "create", cfg.Create, "create the topic if it does not exist")
	fs.StringVar(&cfg.Compression, "compression", cfg.Compression, "`codec`: none, lz4, zstd, snappy or gzip")
	fs.Int64Var(&cfg.Keys, "keys", cfg.Keys,
		"key the records over `N` keys (zero-padded decimal indexes, all of one width), 0 = keyless")
	fs.StringVar(&cfg.KeyOrder, "key-order", cfg.KeyOrder,
		"with --keys: `order` of the key indexes, random (uniform) or sequential (round-robin over the run)")
	fs.Float64Var(&cfg.Tombstones, "tombstones", cfg.Tombstones,
		"with --keys: `fraction` of records sent as tombstones (null value), 0 to 1")
	var tcfg topicConfigs
	fs.Var(&tcfg, "topic-config",
		"`key=value` config of the topic --create makes; repeatable or a comma list")
	fs.StringVar(&cfg.Output, "output", cfg.Output, "result `format`: text or json")
	fs.StringVar(&cfg.ClientID, "client-id", cfg.ClientID, "client `id` sent to the broker")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "stop after this `duration`, 0 = no limit")
	fs.BoolVar(&cfg.Transactional, "transactional", cfg.Transactional,
		"produce in transactions (begin, --transaction-records records, commit), one transactional ID per producer")
	fs.IntVar(&cfg.TransactionRecords, "transaction-records", cfg.TransactionRecords,
		"records per transaction (`N`) with --transactional")
	sf := securityFlags(fs)
	help, err := parseFlags("produce", fs, args)
	if help || err != nil {
		return cfg, help, err
	}
	if err := resolveSecurity("produce", sf, &cfg.Addr, &cfg.Security); err != nil {
		return cfg, false, err
	}
	if !cfg.Transactional && flagSet(fs, "transaction-records") {
		return cfg, false, flagError("produce", "transaction-records", "applies only with --transactional")
	}
	if cfg.Keys == 0 {
		for _, name := range []string{"key-order", "tombstones"} {
			if flagSet(fs, name) {
				return cfg, false, flagError("produce", name, "applies only with --keys")
			}
		}
	}
	if len(tcfg) > 0 && !cfg.Create {
		// An existing topic keeps its configs: the bench never alters one.
		return cfg, false, flagError("produce", "topic-config", "applies only with --create")
	}
	cfg.TopicConfigs = tcfg
	return cfg, false, cfg.validate()
}

func (cfg *ProduceConfig) validate() error {
	const cmd = "produce"
	if cfg.KeyOrder == "" {
		cfg.KeyOrder = keyOrderRandom
	}
	switch {
	case strings.TrimSpace(cfg.Addr) == "":
		return flagError(cmd, "addr", "required")
	case cfg.Topic == "":
		return flagError(cmd, "topic", "required")
	case cfg.Records <= 0:
		return flagError(cmd, "records", "must be at least 1 (got %d)", cfg.Records)
	case cfg.Size < 0 || cfg.Size > 64<<20:
		return flagError(cmd, "size", "must be between 0 and %d bytes (got %d)", 64<<20, cfg.Size)
	case cfg.BatchBytes < 1024 || cfg.BatchBytes > 1<<30:
		return flagError(cmd, "batch", "must be between 1024 and %d bytes (got %d)", 1<<30, cfg.BatchBytes)
	case cfg.Linger < 0:
		return flagError(cmd, "linger", "must not be negative (got %s)", cfg.Linger)
	case cfg.Producers < 1 || cfg.Producers > 1024:
		return flagError(cmd, "producers", "must be between 1 and 1024 (got %d)", cfg.Producers)
	case cfg.Rate < 0:
		return flagError(cmd, "rate", "must not be negative (got %g)", cfg.Rate)
	case cfg.Partitions < 0:
		return flagError(cmd, "partitions", "must not be negative (got %d)", cfg.Partitions)
	case cfg.Replicas < 0 || cfg.Replicas > 32767:
		return flagError(cmd, "replicas", "must be between 0 and 32767 (got %d)", cfg.Replicas)
	case cfg.Timeout < 0:
		return flagError(cmd, "timeout", "must not be negative (got %s)", cfg.Timeout)
	case cfg.Keys < 0:
		return flagError(cmd, "keys", "must not be negative (got %d)", cfg.Keys)
	case cfg.KeyOrder != keyOrderRandom && cfg.KeyOrder != keyOrderSequential:
		return flagError(cmd, "key-order", "must be random or sequential (got %q)", cfg.KeyOrder)
	case !(cfg.Tombstones >= 0 && cfg.Tombstones <= 1): // NaN too
		return flagError(cmd, "tombstones", "must be a fraction between 0 and 1 (got %g)", cfg.Tombstones)
	case cfg.Tombstones > 0 && cfg.Keys == 0:
		return flagError(cmd, "tombstones", "needs --keys: a tombstone deletes a key")
	case cfg.Transactional && cfg.TransactionRecords < 1:
		return flagError(cmd, "transaction-records", "must be at least 1 (got %d)", cfg.TransactionRecords)
	case cfg.Transactional && cfg.Acks != "all" && cfg.Acks != "-1":
		return flagError(cmd, "acks", "must be all with --transactional: transactions need the idempotent producer (got %q)", cfg.Acks)
	}
	if _, err := acksOpts(cfg.Acks); err != nil {
		return flagError(cmd, "acks", "%v", err)
	}
	if _, err := codec(cfg.Compression); err != nil {
		return flagError(cmd, "compression", "%v", err)
	}
	if cfg.Output != "text" && cfg.Output != "json" {
		return flagError(cmd, "output", "must be text or json (got %q)", cfg.Output)
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	return nil
}

// flagSet reports whether the command line set flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func acksOpts(acks string) ([]kgo.Opt, error) {
	switch acks {
	case "all", "-1":
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, nil
	case "1":
		// Idempotence requires acks=all.
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}, nil
	case "0":
		return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}, nil
	}
	return nil, fmt.Errorf("must be all, 1 or 0 (got %q)", acks)
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("must be none, lz4, zstd, snappy or gzip (got %q)", name)
}

// payloadSpread is how many distinct value offsets the payload buffer
// offers, so consecutive records differ (no accidental cross-record
// compression) without generating random bytes per record.
const payloadSpread = 64 << 10

// Produce runs a produce benchmark. progress receives the live line (nil: none).
// A run with failed records returns its Result and an error matching
// ErrFailed.
func Produce(ctx context.Context, cfg ProduceConfig, progressW io.Writer) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	userCtx := ctx
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	if err := ensureTopic(ctx, cfg); err != nil {
		return Result{}, err
	}

	payload := make([]byte, cfg.Size+payloadSpread)
	_, _ = crand.Read(payload) // never fails (Go 1.24+), and never all zero
	keys := newKeySpace(cfg.Keys, cfg.KeyOrder)

	acks, _ := acksOpts(cfg.Acks)
	comp, _ := codec(cfg.Compression)
	perProducerBuffer := max((256<<20)/cfg.Producers, 4<<20)
	txnIDs := transactionalIDs(cfg)
	clients := make([]*kgo.Client, cfg.Producers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		opts := append([]kgo.Opt{
			kgo.ProducerLinger(cfg.Linger),
			kgo.ProducerBatchMaxBytes(int32(cfg.BatchBytes)),
			kgo.ProducerBatchCompression(comp),
			kgo.MaxBufferedRecords(1 << 16),
			kgo.MaxBufferedBytes(perProducerBuffer),
			kgo.DefaultProduceTopic(cfg.Topic),
		}, acks...)
		if txnIDs != nil {
			opts = append(opts, kgo.TransactionalID(txnIDs[i]))
		}
		cl, err := client.NewKgo(clientOptions(cfg.Addr, cfg.ClientID, cfg.Security), opts...)
		if err != nil {
			return Result{}, fmt.Errorf("bench produce: new producer: %w", err)
		}
		clients[i] = cl
		// Connect before the clock starts, so setup is not measured.
		if err := cl.Ping(ctx); err != nil {
			return Result{}, fmt.Errorf("bench produce: broker at %s: %w", cfg.Addr, err)
		}
	}

	var (
		hist                 = NewHistogram()
		stalls               = newStallTracker()
		acked, ackedBytes    atomic.Int64
		failed               atomic.Int64
		firstErr             atomic.Pointer[error]
		pending              sync.WaitGroup
		producersDone        sync.WaitGroup
		perProducer, remains = cfg.Records / int64(cfg.Producers), cfg.Records % int64(cfg.Producers)
		txns                 = newTxnStats()
	)
	// The send time travels in a closure rather than in the record
	// timestamp: a LogAppendTime topic overwrites that with broker time.
	promise := func(r *kgo.Record, sent time.Time, err error) {
		defer pending.Done()
		if err != nil {
			// Records abandoned because the run was stopped are not
			// broker failures.
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
			}
			return
		}
		now := time.Now()
		hist.Record(now.Sub(sent))
		stalls.acked(r.Partition, now)
		acked.Add(1)
		ackedBytes.Add(int64(len(r.Key) + len(r.Value)))
	}

	prog := startProgress(progressW, "produce", cfg.ProgressInterval, &acked, &ackedBytes)
	start := time.Now()
	for i, cl := range clients {
		n := perProducer
		if int64(i) < remains {
			n++
		}
		producersDone.Add(1)
		go func() {
			defer producersDone.Done()
			var pace *pacer
			if cfg.Rate > 0 {
				pace = newPacer(cfg.Rate / float64(cfg.Producers))
			}
			gen := newRecordGen(&cfg, payload, keys, i)
			if txnIDs != nil {
				txnProducer{
					cfg: &cfg, cl: cl, pace: pace, gen: gen,
					hist: hist, stalls: stalls, acked: &acked, ackedBytes: &ackedBytes,
					failed: &failed, firstErr: &firstErr, stats: txns,
				}.run(ctx, n)
				return
			}
			for range n {
				if pace != nil {
					if pace.wait(ctx) != nil {
						return
					}
				} else if ctx.Err() != nil {
					return
				}
				r := gen.next()
				sent := time.Now()
				r.Timestamp = sent
				pending.Add(1)
				cl.Produce(ctx, r, func(r *kgo.Record, err error) { promise(r, sent, err) })
			}
		}()
	}
	producersDone.Wait()
	pending.Wait()
	elapsed := time.Since(start)
	prog.Stop()

	res := Result{
		Mode:    "produce",
		Topic:   cfg.Topic,
		Records: acked.Load(),
		Bytes:   ackedBytes.Load(),
		Failed:  failed.Load(),
		Latency: latencyOf(hist),
		Stall:   stalls.longest(),
		Params: map[string]any{
			"records": cfg.Records, "size": cfg.Size, "acks": cfg.Acks, "batch": cfg.BatchBytes,
			"linger": cfg.Linger.String(), "producers": cfg.Producers, "rate": cfg.Rate,
			"compression": cfg.Compression,
		},
	}
	if cfg.Keys > 0 {
		res.Params["keys"] = cfg.Keys
		res.Params["key_order"] = cfg.KeyOrder
		res.Params["tombstones"] = cfg.Tombstones
	}
	if len(cfg.TopicConfigs) > 0 {
		res.Params["topic_configs"] = cfg.TopicConfigs
	}
	if txnIDs != nil {
		res.Transactions = txns.transactions(cfg.TransactionRecords)
		res.Commit = latencyOf(txns.commit)
		res.Params["transactional"] = true
		res.Params["transaction_records"] = cfg.TransactionRecords
	}
	res.setRates(elapsed)
	if p := firstErr.Load(); p != nil {
		res.FirstError = client.Explain(*p)
		if name := client.ErrorName(*p); name != "" {
			res.FirstError = name + ": " + res.FirstError
		}
	}
	switch {
	case res.Failed > 0 && txnIDs != nil:
		return res, fmt.Errorf("bench produce: %w: %d of %d records not committed (%d transactions aborted), first error: %s",
			ErrFailed, res.Failed, cfg.Records, res.Transactions.Aborted, res.FirstError)
	case res.Failed > 0:
		return res, fmt.Errorf("bench produce: %w: %d of %d records failed, first: %s",
			ErrFailed, res.Failed, cfg.Records, res.FirstError)
	case userCtx.Err() != nil:
		return res, fmt.Errorf("bench produce: interrupted after %d records: %w", res.Records, userCtx.Err())
	}
	return res, nil
}

// ensureTopic checks the topic exists, creating it with --create.
func ensureTopic(ctx context.Context, cfg ProduceConfig) error {
	cl, err := client.Dial(ctx, clientOptions(cfg.Addr, cfg.ClientID, cfg.Security))
	if err != nil {
		return fmt.Errorf("bench produce: %w", err)
	}
	defer cl.Close()
	_, err = cl.Range(ctx, cfg.Topic, nil, client.Latest())
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, client.ErrNotFound):
		return fmt.Errorf("bench produce: %w", err)
	case !cfg.Create:
		return fmt.Errorf("bench produce: topic %q does not exist (pass --create to create it): %w",
			cfg.Topic, err)
	}
	parts := int32(cfg.Partitions)
	if parts == 0 {
		parts = -1
	}
	rf := int16(cfg.Replicas)
	if rf == 0 {
		rf = -1
	}
	if err := cl.CreateTopic(ctx, cfg.Topic, parts, rf, cfg.TopicConfigs); err != nil && !errors.Is(err, client.ErrExists) {
		return fmt.Errorf("bench produce: %w", err)
	}
	return nil
}

// clientOptions are the net/client options of every connection the bench
// opens, so its housekeeping client and its hot-path kgo clients reach the
// broker the same way.
func clientOptions(addr, clientID string, sec client.Security) client.Options {
	return client.Options{Addr: addr, ClientID: clientID, Security: sec}
}
