package coord

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/moonmq/moonmq/engine/batch"
)

// replayChunk bounds one read of a partition during replay; the log may
// be long (its active segment is never compacted, and a log may be dirty
// for a while), so it is streamed, never read whole.
const replayChunk = 1 << 20

// replayStats is what one replay read: records (markers included) and
// bytes, the work a coordinator's load time grows with (compaction bounds
// them by the live keys).
type replayStats struct {
	records, bytes int64
	skipped        int // records apply could not decode
}

// replayInto reads partition p whole, in log order, into apply, and the
// end-transaction markers into marker (nil: skipped). It takes no lock:
// nothing writes p until its shard serves. end is the log end replayed
// through.
func replayInto(store Storage, p int32, topic string, log *slog.Logger, apply func(Record) bool,
	marker func(offset, pid int64, epoch int16, commit bool),
) (gen uint64, end int64, st replayStats, err error) {
	// The generation first: a rewrite during the replay shows as a change
	// at the next recheck.
	if gen, err = store.Generation(p); err != nil {
		return 0, 0, st, err
	}
	start, end, err := store.Bounds(p)
	if err != nil {
		return 0, 0, st, err
	}
	off := start
	for off < end {
		data, err := store.Read(p, off, replayChunk)
		if err != nil {
			if next, ok := store.Damaged(p, off); ok && next > off {
				// The records in a damaged range are lost; the rest of the
				// partition still holds its state.
				log.Error("damaged records in an internal topic: the state in them is lost",
					"topic", topic, "partition", p, "from_offset", off, "to_offset", next, "err", err)
				off = next
				continue
			}
			return 0, 0, st, fmt.Errorf("replaying %s-%d: %w", topic, p, err)
		}
		if len(data) == 0 {
			break
		}
		st.bytes += int64(len(data))
		next := off
		err = batch.Iterate(data, func(h batch.Header, raw []byte) bool {
			next = h.NextOffset()
			st.records += int64(h.NumRecords)
			if h.IsControl() {
				if h.NumRecords == 0 {
					// The cleaner keeps a marker it removed as an empty
					// batch when it was its producer's last (Kafka's
					// rule): the transaction's records are gone, there
					// is nothing to apply.
					return true
				}
				m, err := batch.ParseEndTxnMarker(raw)
				switch {
				case errors.Is(err, batch.ErrNotMarker): // another kind of control record
				case err != nil:
					st.skipped++
				case marker != nil:
					marker(h.BaseOffset, h.ProducerID, h.ProducerEpoch, m.Commit)
				}
				return true
			}
			rerr := batch.Records(raw, func(r batch.Record) bool {
				rec := Record{Record: r, Offset: h.RecordOffset(r), ProducerID: h.ProducerID,
					ProducerEpoch: h.ProducerEpoch, Transactional: h.IsTransactional()}
				if !apply(rec) {
					st.skipped++
				}
				return true
			})
			if rerr != nil {
				st.skipped++
			}
			return true
		})
		if err != nil {
			return 0, 0, st, fmt.Errorf("replaying %s-%d: %w", topic, p, err)
		}
		if next <= off {
			break
		}
		off = next
	}
	return gen, end, st, nil
}
