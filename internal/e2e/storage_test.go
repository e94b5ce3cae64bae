package e2e

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/testbroker"
)

// brokerGet returns the status and body of a GET on the broker's HTTP port.
func brokerGet(t *testing.T, b *testbroker.Broker, path string) (int, string) {
	t.Helper()
	return httpGet(t, "http://"+b.HTTPAddr+path)
}

type statsDoc struct {
	Topics []struct {
		Name       string `json:"name"`
		Partitions []struct {
			Partition     int32  `json:"partition"`
			LogEndOffset  int64  `json:"log_end_offset"`
			State         string `json:"state"`
			Error         string `json:"error"`
			CorruptRanges []struct {
				FromOffset int64 `json:"from_offset"`
				ToOffset   int64 `json:"to_offset"`
			} `json:"corrupt_ranges"`
		} `json:"partitions"`
	} `json:"topics"`
	Cleaner struct {
		Cleanings int64 `json:"cleanings"`
		Passes    int64 `json:"passes"`
	} `json:"cleaner"`
}

func stats(t *testing.T, b *testbroker.Broker) statsDoc {
	t.Helper()
	code, body := brokerGet(t, b, "/stats")
	require.Equal(t, 200, code)
	var doc statsDoc
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	return doc
}

// produceValues produces n records with values "v<i>" padded to size bytes
// to partition 0 of topic, uncompressed in batches of at most batchBytes,
// and waits for every acknowledgement.
func produceValues(t *testing.T, addr, topic string, from, n, size, batchBytes int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(int32(batchBytes)))
	require.NoError(t, err)
	defer cl.Close()
	pad := strings.Repeat("x", size)
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("v%d-%s", i, pad))})
	}
	require.NoError(t, cl.ProduceSync(ctxT(t, time.Minute), rs...).FirstErr())
}

// consumeRange reads offsets [from, to) of partition 0 and returns the
// record offsets seen.
func consumeRange(t *testing.T, addr, topic string, from, to int64) []int64 {
	t.Helper()
	if from >= to {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))
	require.NoError(t, err)
	defer cl.Close()
	var got []int64
	ctx := ctxT(t, time.Minute)
	for len(got) == 0 || got[len(got)-1] < to-1 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d records of [%d, %d)", len(got), from, to)
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < to {
				got = append(got, r.Offset)
			}
		})
	}
	return got
}

// middleBatch returns the position of a batch in the middle of a segment
// file and its length, by walking the batch framing.
func middleBatch(t *testing.T, path string) (pos, length int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var starts []int64
	for p := int64(0); p+12 <= int64(len(data)); {
		starts = append(starts, p)
		p += 12 + int64(binary.BigEndian.Uint32(data[p+8:]))
	}
	require.Greater(t, len(starts), 2)
	i := len(starts) / 2
	return starts[i], starts[i+1] - starts[i]
}

// TestCorruptByteKeepsTheRest is finding 1 of issue 10 on a real process:
// one flipped byte in a sealed segment (the 5th of ~35) together with a
// damaged derived file deleted 10,450 of 12,000 acknowledged records at the
// next start. Now only the damaged batch's offsets are lost to reads
// (CORRUPT_MESSAGE), everything before and after is served, it is reported
// (ERROR log, /stats, DESCRIBE TOPIC), /readyz stays 200, and the next
// produce continues after the old end.
func TestCorruptByteKeepsTheRest(t *testing.T) {
	for _, derived := range []string{"none", "index", "timeindex", "recovery-point", "epochs"} {
		t.Run(derived, func(t *testing.T) {
			t.Parallel()
			const records = 12_000
			b := testbroker.Start(t)
			_, adm := newClient(t, b.Addr)
			createTopic(t, adm, "c", 1, map[string]*string{"segment.bytes": kadm.StringPtr("131072")})
			produceValues(t, b.Addr, "c", 0, records, 300, 16<<10)
			require.NoError(t, b.Stop())

			dir := filepath.Join(b.DataDir, "c-0")
			logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
			require.NoError(t, err)
			sort.Strings(logs)
			require.Greater(t, len(logs), 20)
			fifth := logs[4]
			pos, length := middleBatch(t, fifth)
			f, err := os.OpenFile(fifth, os.O_RDWR, 0)
			require.NoError(t, err)
			at := pos + 61 + length/2 // inside the records, covered by the CRC
			var one [1]byte
			_, err = f.ReadAt(one[:], at)
			require.NoError(t, err)
			one[0] ^= 0x20
			_, err = f.WriteAt(one[:], at)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			base := strings.TrimSuffix(fifth, ".log")
			switch derived {
			case "index":
				require.NoError(t, os.Remove(base+".index"))
			case "timeindex":
				require.NoError(t, os.Remove(base+".timeindex"))
			case "recovery-point":
				require.NoError(t, os.Remove(filepath.Join(dir, "recovery-point-checkpoint")))
			case "epochs":
				require.NoError(t, os.WriteFile(filepath.Join(dir, "leader-epoch-checkpoint"), []byte("0\n2\n0 0\ngarbage\n"), 0o644))
			}

			b.Restart()
			after, err := filepath.Glob(filepath.Join(dir, "*.log"))
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(after), len(logs), "no segment deleted")
			code, body := brokerGet(t, b, "/readyz")
			require.Equal(t, 200, code, body)

			// Reading the damaged batch is what reports it, if recovery did not.
			cl, _ := newClient(t, b.Addr)
			var from, to int64 = -1, -1
			for off := int64(0); off < records && from < 0; off += 50 {
				req := kmsg.NewPtrFetchRequest()
				req.MaxBytes = 1 << 20
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = "c"
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.FetchOffset, rp.PartitionMaxBytes = off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
				require.NoError(t, err)
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					require.Equal(t, kerr.CorruptMessage.Code, code, "offset %d", off)
					for _, tp := range stats(t, b).Topics {
						if tp.Name == "c" && len(tp.Partitions[0].CorruptRanges) == 1 {
							from, to = tp.Partitions[0].CorruptRanges[0].FromOffset, tp.Partitions[0].CorruptRanges[0].ToOffset
						}
					}
					require.GreaterOrEqual(t, from, int64(0), "reported in /stats")
				}
			}
			require.GreaterOrEqual(t, from, int64(0), "the damaged batch is not served")
			require.Less(t, to-from, int64(200), "only the damaged batch is lost to reads")
			got := append(consumeRange(t, b.Addr, "c", 0, from), consumeRange(t, b.Addr, "c", to, records)...)
			require.Len(t, got, records-int(to-from), "every other record is served")
			require.Contains(t, b.Log(), `"level":"ERROR","msg":"damaged data in the log`)

			out, err := exec.Command(testbroker.Binary(t), "-e", "DESCRIBE TOPIC c;", "--addr", b.Addr).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "damaged")
			require.Contains(t, string(out), fmt.Sprintf("%d", from))

			produceValues(t, b.Addr, "c", records, 1, 10, 16<<10)
			_, adm = newClient(t, b.Addr) // the restarted broker listens elsewhere
			end, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), "c")
			require.NoError(t, err)
			o, _ := end.Lookup("c", 0)
			require.Equal(t, int64(records+1), o.Offset, "offsets continue after the old end")
		})
	}
}

// TestDescriptorBudget is finding 5 of issue 10: under a low descriptor
// limit a create of 10,000 partitions answered OK, half opened, and the
// broker then accepted no connections and failed its next start. Now the
// create is refused whole with a message saying what to do, segments of a
// busy topic hold no descriptors once sealed, and the broker keeps serving
// and restarts.
func TestDescriptorBudget(t *testing.T) {
	const limit = 1024
	b := testbroker.StartIn(t, t.TempDir(), limit, "--max-connections", "50")
	_, adm := newClient(t, b.Addr)
	ctx := ctxT(t, time.Minute)

	resp, err := adm.CreateTopic(ctx, 10000, 1, nil, "p10k")
	require.ErrorIs(t, err, kerr.PolicyViolation)
	require.Contains(t, resp.ErrMessage, "file descriptor limit of 1024")
	tds, err := adm.ListTopics(ctx)
	require.NoError(t, err)
	require.False(t, tds.Has("p10k"), "nothing of the refused create is applied")

	// Many small segments: sealed ones give their descriptors back.
	tr, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1024")}, "tiny")
	require.NoError(t, err)
	require.NoError(t, tr.Err, tr.ErrMessage)
	produceValues(t, b.Addr, "tiny", 0, 1300, 600, 1000)
	segs, err := filepath.Glob(filepath.Join(b.DataDir, "tiny-0", "*.log"))
	require.NoError(t, err)
	require.Greater(t, len(segs), limit, "more segments than descriptors")
	consumeRange(t, b.Addr, "tiny", 0, 1300)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", b.Pid()))
	require.NoError(t, err)
	require.Less(t, len(fds), limit/2)

	require.NoError(t, b.Stop())
	b.Restart()
	code, body := brokerGet(t, b, "/readyz")
	require.Equal(t, 200, code, body)
	consumeRange(t, b.Addr, "tiny", 0, 1300)
}

// TestFullDiskHeals is finding 7 of issue 10: one ENOSPC took a partition
// offline until a restart, and DeleteRecords could not free space. Now the
// partition is reported offline (/readyz, /metrics, /stats), DeleteRecords
// works on it, and it comes back by itself once there is room again.
func TestFullDiskHeals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	filler := filepath.Join(dir, "filler")
	b := testbroker.StartIn(t, filepath.Join(dir, "data"), 0)
	_, adm := newClient(t, b.Addr)
	createTopic(t, adm, "full", 1, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")})
	produceValues(t, b.Addr, "full", 0, 2000, 1000, 64<<10)
	require.NoError(t, exec.Command("sh", "-c", "dd if=/dev/zero of="+filler+" bs=1M 2>/dev/null || true").Run())

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("full"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer cl.Close()
	var perr error
	for i := 0; i < 200 && perr == nil; i++ {
		perr = cl.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Value: []byte(strings.Repeat("y", 64<<10))}).FirstErr()
	}
	require.ErrorIs(t, perr, kerr.KafkaStorageError)
	testbroker.WaitFor(t, 10*time.Second, "/readyz to report the offline partition", func() bool {
		code, body := brokerGet(t, b, "/readyz")
		return code == 503 && strings.Contains(body, "full-0")
	})
	_, metrics := brokerGet(t, b, "/metrics")
	require.Contains(t, metrics, "moonmq_partitions_offline 1")
	st := stats(t, b)
	require.Equal(t, "offline", st.Topics[0].Partitions[0].State)
	require.Contains(t, st.Topics[0].Partitions[0].Error, "no space left")

	// Freeing space the Kafka way works while the partition is offline.
	deleted, err := adm.DeleteRecords(ctxT(t, 10*time.Second), kadm.Offsets{"full": {0: {At: 1000}}})
	require.NoError(t, err)
	require.NoError(t, deleted.Error())
	require.NoError(t, os.Remove(filler))
	testbroker.WaitFor(t, 60*time.Second, "the partition to come back", func() bool {
		code, _ := brokerGet(t, b, "/readyz")
		return code == 200
	})
	require.NoError(t, cl.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Value: []byte("back")}).FirstErr())
}
