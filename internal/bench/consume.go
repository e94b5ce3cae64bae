package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/cli"
	"github.com/moonmq/moonmq/net/client"
)

const consumeSynopsis = "consume --topic T [flags]"

// consumeIdle is the backstop that ends a to-the-end read whose last offsets
// before the snapshot end are gone (compaction gaps): nothing more will
// arrive for those partitions.
const consumeIdle = 10 * time.Second

// ConsumeConfig configures a consume run.
type ConsumeConfig struct {
	Addr  string
	Topic string
	// Records to read; 0 reads to the end offsets snapshotted at start.
	// With N > 0 the run waits for new records if fewer exist.
	Records           int64
	From              string // a client.ParsePosition position
	FetchMaxBytes     int
	FetchMaxPartBytes int
	Output            string
	ClientID          string
	Timeout           time.Duration
	// Security is TLS and SASL for every connection of the run.
	Security client.Security

	// ProgressInterval is the live progress period (1s from the CLI).
	ProgressInterval time.Duration

	from  client.Position
	flags *flag.FlagSet
}

// DefaultConsumeConfig returns the CLI defaults.
func DefaultConsumeConfig() ConsumeConfig {
	return ConsumeConfig{
		Addr:              cli.Addr(),
		From:              "earliest",
		FetchMaxBytes:     50 << 20,
		FetchMaxPartBytes: 8 << 20,
		Output:            "text",
		ClientID:          "moonmq-bench",
		ProgressInterval:  time.Second,
	}
}

func parseConsume(args []string) (ConsumeConfig, bool, error) {
	cfg := DefaultConsumeConfig()
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	cfg.flags = fs
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, cli.AddrUsage)
	fs.StringVar(&cfg.Topic, "topic", cfg.Topic, "`topic` to read (required)")
	fs.Int64Var(&cfg.Records, "records", cfg.Records, "records to read (`N`), 0 = up to the end offsets at start")
	fs.StringVar(&cfg.From, "from", cfg.From, "start `position`: earliest, latest, an offset, -N from the end, or an RFC 3339 time")
	fs.IntVar(&cfg.FetchMaxBytes, "fetch-max-bytes", cfg.FetchMaxBytes, "max `bytes` per fetch response")
	fs.IntVar(&cfg.FetchMaxPartBytes, "fetch-max-partition-bytes", cfg.FetchMaxPartBytes, "max `bytes` per partition in a fetch")
	fs.StringVar(&cfg.Output, "output", cfg.Output, "result `format`: text or json")
	fs.StringVar(&cfg.ClientID, "client-id", cfg.ClientID, "client `id` sent to the broker")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "stop after this `duration`, 0 = no limit")
	sf := securityFlags(fs)
	help, err := parseFlags("consume", fs, args)
	if help || err != nil {
		return cfg, help, err
	}
	if err := resolveSecurity("consume", sf, &cfg.Addr, &cfg.Security); err != nil {
		return cfg, false, err
	}
	return cfg, false, cfg.validate()
}

func (cfg *ConsumeConfig) validate() error {
	const cmd = "consume"
	switch {
	case strings.TrimSpace(cfg.Addr) == "":
		return flagError(cmd, "addr", "required")
	case cfg.Topic == "":
		return flagError(cmd, "topic", "required")
	case cfg.Records < 0:
		return flagError(cmd, "records", "must not be negative (got %d)", cfg.Records)
	case cfg.FetchMaxBytes < 1024 || cfg.FetchMaxBytes > 1<<30:
		return flagError(cmd, "fetch-max-bytes", "must be between 1024 and %d (got %d)", 1<<30, cfg.FetchMaxBytes)
	case cfg.FetchMaxPartBytes < 1024 || cfg.FetchMaxPartBytes > 1<<30:
		return flagError(cmd, "fetch-max-partition-bytes", "must be between 1024 and %d (got %d)", 1<<30, cfg.FetchMaxPartBytes)
	case cfg.Output != "text" && cfg.Output != "json":
		return flagError(cmd, "output", "must be text or json (got %q)", cfg.Output)
	case cfg.Timeout < 0:
		return flagError(cmd, "timeout", "must not be negative (got %s)", cfg.Timeout)
	}
	from, err := client.ParsePosition(cfg.From)
	if err != nil {
		return flagError(cmd, "from", "%v", err)
	}
	cfg.from = from
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	return nil
}

// Consume runs a consume benchmark. progress receives the live line (nil:
// none).
func Consume(ctx context.Context, cfg ConsumeConfig, progressW io.Writer) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	userCtx := ctx
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	ranges, err := snapshotRanges(ctx, cfg)
	if err != nil {
		return Result{}, err
	}

	// To-the-end mode reads only partitions with something to read and
	// stops each at its snapshot end; count mode reads everything from
	// the start position until it has N records.
	toEnd := cfg.Records == 0
	ends := make(map[int32]int64, len(ranges))
	offsets := make(map[int32]kgo.Offset, len(ranges))
	var target int64
	for _, r := range ranges {
		if toEnd && r.From >= r.End {
			continue
		}
		ends[r.Partition] = r.End
		offsets[r.Partition] = kgo.NewOffset().At(r.From)
		target += r.Records()
	}
	if !toEnd {
		target = cfg.Records
	}
	res := Result{
		Mode:  "consume",
		Topic: cfg.Topic,
		Params: map[string]any{
			"records": cfg.Records, "from": cfg.from.String(), "target": target,
			"fetch_max_bytes": cfg.FetchMaxBytes, "fetch_max_partition_bytes": cfg.FetchMaxPartBytes,
		},
	}
	if target == 0 {
		return res, nil
	}

	cl, err := client.NewKgo(clientOptions(cfg.Addr, cfg.ClientID, cfg.Security),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}),
		kgo.FetchMaxBytes(int32(cfg.FetchMaxBytes)),
		kgo.FetchMaxPartitionBytes(int32(cfg.FetchMaxPartBytes)),
		kgo.FetchMaxWait(500*time.Millisecond),
		// Control records (transaction markers) occupy offsets; seeing
		// them lets a partition reach its snapshot end.
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return res, fmt.Errorf("bench consume: new consumer: %w", err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		return res, fmt.Errorf("bench consume: broker at %s: %w", cfg.Addr, err)
	}

	var count, bytes atomic.Int64
	prog := startProgress(progressW, "consume", cfg.ProgressInterval, &count, &bytes)
	start := time.Now()
	lastProgress := start
	var runErr error
loop:
	for {
		pctx, cancel := context.WithTimeout(ctx, consumeIdle)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			break
		}
		var fatal error
		fs.EachError(func(_ string, _ int32, err error) {
			if fatal == nil && (errors.Is(err, kerr.UnknownTopicOrPartition) ||
				errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kgo.ErrClientClosed)) {
				fatal = err
			}
		})
		if fatal != nil {
			runErr = fmt.Errorf("bench consume: %w", fatal)
			break
		}
		var n, b int64
		finished := false
		fs.EachRecord(func(r *kgo.Record) {
			if finished {
				return
			}
			if toEnd {
				end, ok := ends[r.Partition]
				if !ok || r.Offset >= end {
					return
				}
				if r.Offset+1 >= end {
					delete(ends, r.Partition)
				}
			}
			if r.Attrs.IsControl() {
				return
			}
			n++
			b += int64(len(r.Key) + len(r.Value))
			if !toEnd && count.Load()+n >= target {
				finished = true
			}
		})
		if n > 0 {
			count.Add(n)
			bytes.Add(b)
			lastProgress = time.Now()
		}
		switch {
		case finished, toEnd && len(ends) == 0:
			break loop
		case toEnd && time.Since(lastProgress) >= consumeIdle:
			break loop // compaction gap at the tail; see consumeIdle
		}
	}
	elapsed := time.Since(start)
	prog.Stop()
	res.Records, res.Bytes = count.Load(), bytes.Load()
	res.setRates(elapsed)
	if runErr == nil && userCtx.Err() != nil {
		runErr = fmt.Errorf("bench consume: interrupted after %d records: %w", res.Records, userCtx.Err())
	}
	return res, runErr
}

// snapshotRanges resolves the start position and end offsets of every
// partition.
func snapshotRanges(ctx context.Context, cfg ConsumeConfig) ([]client.PartitionRange, error) {
	cl, err := client.Dial(ctx, clientOptions(cfg.Addr, cfg.ClientID, cfg.Security))
	if err != nil {
		return nil, fmt.Errorf("bench consume: %w", err)
	}
	defer cl.Close()
	ranges, err := cl.Range(ctx, cfg.Topic, nil, cfg.from)
	if err != nil {
		return nil, fmt.Errorf("bench consume: %w", err)
	}
	return ranges, nil
}
