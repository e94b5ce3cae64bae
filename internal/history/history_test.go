package history

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func acked(producer string, part int32, value string, offset int64) Produce {
	return Produce{Producer: producer, Partition: part, Value: value, Outcome: Acked, Offset: offset}
}

func unknown(producer string, part int32, value string) Produce {
	return Produce{Producer: producer, Partition: part, Value: value, Outcome: Unknown, Err: "timeout"}
}

func rec(offset int64, value string, epoch int32) Record {
	return Record{Offset: offset, Value: value, LeaderEpoch: epoch}
}

func TestCheck(t *testing.T) {
	// A clean run both cases start from: two producers on two partitions,
	// one unknown attempt that was stored and one that was not, a
	// leader change at epoch 1 on partition 0.
	base := func() (*History, map[int32][]Record) {
		h := &History{}
		h.Produced(acked("p1", 0, "a1", 0))
		h.Produced(acked("p2", 0, "b1", 1))
		h.Produced(acked("p1", 1, "a2", 0))
		h.Produced(unknown("p1", 0, "a3"))
		h.Produced(acked("p1", 0, "a4", 3))
		h.Produced(unknown("p2", 1, "b2"))
		h.Produced(Produce{Producer: "p2", Partition: 1, Value: "b3", Outcome: NotWritten})
		h.ReadRecord(Read{Reader: "c", Partition: 0, Offset: 0, Value: "a1", LeaderEpoch: 0, HW: 2})
		h.ReadRecord(Read{Reader: "c", Partition: 0, Offset: 1, Value: "b1", LeaderEpoch: 0, HW: 2})
		h.ReadRecord(Read{Reader: "c", Partition: 0, Offset: 3, Value: "a4", LeaderEpoch: 1, HW: 4})
		h.SawEpoch(Epoch{Source: "n1", Partition: 0, Epoch: 0})
		h.SawEpoch(Epoch{Source: "n1", Partition: 0, Epoch: 1})
		h.SawEpoch(Epoch{Source: "n2", Partition: 0, Epoch: 0}) // another node lags: fine
		final := map[int32][]Record{
			0: {rec(0, "a1", 0), rec(1, "b1", 0), rec(2, "a3", 1), rec(3, "a4", 1)},
			1: {rec(0, "a2", 0)},
		}
		return h, final
	}

	cases := []struct {
		name string
		// mutate breaks the clean run; nil keeps it.
		mutate func(h *History, final map[int32][]Record)
		want   []string // substrings of the violations, in order
	}{
		{name: "clean"},
		{
			name:   "acknowledged record lost",
			mutate: func(_ *History, f map[int32][]Record) { f[1] = nil },
			want:   []string{`lost: acknowledged record "a2" (producer p1, partition 1, offset 0) is not in the final log (that offset holds nothing)`},
		},
		{
			name: "acknowledged record replaced by a truncation",
			mutate: func(_ *History, f map[int32][]Record) {
				f[0] = []Record{rec(0, "a1", 0), rec(1, "b1", 0), rec(2, "a3", 1), rec(3, "x", 2)}
			},
			want: []string{
				`lost: acknowledged record "a4" (producer p1, partition 0, offset 3) is not in the final log (that offset holds "x")`,
				`read lost: reader c read "a4" at partition 0 offset 3, where the final log holds "x"`,
			},
		},
		{
			name: "acknowledged record at another offset",
			mutate: func(_ *History, f map[int32][]Record) {
				f[1] = []Record{rec(0, "z", 0), rec(1, "a2", 0)}
			},
			want: []string{`moved: acknowledged record "a2" (producer p1) was acknowledged at partition 1 offset 0 but is stored at partition 1 offset 1`},
		},
		{
			name: "a retry duplicated",
			mutate: func(_ *History, f map[int32][]Record) {
				f[0] = append(f[0], rec(4, "a4", 1))
			},
			want: []string{`duplicate: value "a4" is stored twice: partition 0 offset 3 and partition 0 offset 4`},
		},
		{
			name: "an unknown attempt stored twice",
			mutate: func(_ *History, f map[int32][]Record) {
				f[1] = append(f[1], rec(1, "b2", 0), rec(2, "b2", 0))
			},
			want: []string{`duplicate: value "b2" is stored twice: partition 1 offset 1 and partition 1 offset 2`},
		},
		{
			name: "a record never sent is stored",
			mutate: func(_ *History, f map[int32][]Record) {
				f[1] = append(f[1], rec(1, "b3", 0))
			},
			want: []string{`phantom: record "b3" (producer p2) was never sent but is stored at partition 1 offset 1`},
		},
		{
			name: "acknowledgements out of order",
			mutate: func(h *History, f map[int32][]Record) {
				h.Produced(acked("p1", 0, "a5", 2)) // after a4 at 3, where a3 was
				f[0][2] = rec(2, "a5", 1)
			},
			want: []string{`order: producer p1, partition 0: "a5" acknowledged at offset 2 after "a4" at offset 3`},
		},
		{
			name: "a read record later lost",
			mutate: func(h *History, f map[int32][]Record) {
				h.ReadRecord(Read{Reader: "c", Partition: 1, Offset: 1, Value: "b2", LeaderEpoch: 0, HW: 2})
			},
			want: []string{`read lost: reader c read "b2" at partition 1 offset 1, which the final log no longer holds`},
		},
		{
			name: "a read above the high watermark",
			mutate: func(h *History, f map[int32][]Record) {
				h.ReadRecord(Read{Reader: "d", Partition: 0, Offset: 2, Value: "a3", LeaderEpoch: 1, HW: 2})
			},
			want: []string{`read above hw: reader d read "a3" at partition 0 offset 2, at or above the high watermark 2 of its fetch`},
		},
		{
			name: "epochs shrink along the log",
			mutate: func(_ *History, f map[int32][]Record) {
				f[0][3].LeaderEpoch = 0
			},
			want: []string{`epoch: partition 0: offset 3 ("a4") has leader epoch 0 after epoch 1 earlier in the log`},
		},
		{
			name: "epochs shrink along a reader's reads",
			mutate: func(h *History, _ map[int32][]Record) {
				h.ReadRecord(Read{Reader: "c", Partition: 0, Offset: 2, Value: "a3", LeaderEpoch: 1, HW: 4})
				h.ReadRecord(Read{Reader: "c", Partition: 0, Offset: 3, Value: "a4", LeaderEpoch: 0, HW: 4})
			},
			want: []string{`epoch: reader c, partition 0: "a4" at offset 3 has leader epoch 0, after epoch 1 at offset 2`},
		},
		{
			name: "a node reports an older epoch",
			mutate: func(h *History, _ map[int32][]Record) {
				h.SawEpoch(Epoch{Source: "n1", Partition: 0, Epoch: 0})
			},
			want: []string{`epoch: n1 reported partition 0's leader epoch 0 after 1`},
		},
		{
			name: "the final log runs backwards",
			mutate: func(_ *History, f map[int32][]Record) {
				f[1] = []Record{rec(0, "a2", 0), rec(0, "q", 0)}
			},
			want: []string{`order: partition 1: final log goes from offset 0 back to 0`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, final := base()
			if c.mutate != nil {
				c.mutate(h, final)
			}
			res := h.Check(final)
			var got []string
			for _, v := range res.Violations {
				got = append(got, v.String())
			}
			require.Len(t, got, len(c.want), "violations:\n%s", res.Error(0))
			for i := range c.want {
				require.Equal(t, c.want[i], got[i])
			}
			require.Equal(t, len(c.want) == 0, res.OK())
			if res.OK() {
				require.Empty(t, res.Error(0))
			}
		})
	}
}

func TestCheckCounts(t *testing.T) {
	h := &History{}
	h.Produced(acked("p", 0, "a", 0))
	h.Produced(unknown("p", 0, "b"))
	h.Produced(unknown("p", 0, "c"))
	h.ReadRecord(Read{Reader: "r", Partition: 0, Offset: 0, Value: "a", LeaderEpoch: -1, HW: -1})
	a, u, r := h.Counts()
	require.Equal(t, [3]int{1, 2, 1}, [3]int{a, u, r})
	res := h.Check(map[int32][]Record{0: {rec(0, "a", -1), rec(1, "c", -1)}})
	require.True(t, res.OK(), res.Error(0))
	require.Equal(t, 2, res.Stored)
	require.Equal(t, 1, res.UnknownStored)
}

func TestErrorLimitsTheList(t *testing.T) {
	h := &History{}
	for i := 0; i < 5; i++ {
		h.Produced(acked("p", 0, fmt.Sprint(i), int64(i)))
	}
	res := h.Check(map[int32][]Record{})
	require.Len(t, res.Violations, 5)
	msg := res.Error(2)
	require.Contains(t, msg, "5 history violations:")
	require.Contains(t, msg, "... and 3 more")
}

func TestRecordingIsConcurrencySafe(t *testing.T) {
	h := &History{}
	var wg sync.WaitGroup
	final := map[int32][]Record{}
	for p := int32(0); p < 4; p++ {
		for i := int64(0); i < 100; i++ {
			final[p] = append(final[p], rec(i, fmt.Sprintf("%d-%d", p, i), 0))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); i < 100; i++ {
				v := fmt.Sprintf("%d-%d", p, i)
				h.Produced(acked(fmt.Sprint(p), p, v, i))
				h.ReadRecord(Read{Reader: fmt.Sprint(p), Partition: p, Offset: i, Value: v, LeaderEpoch: 0, HW: i + 1})
				h.SawEpoch(Epoch{Source: "n", Partition: p, Epoch: 0})
			}
		}()
	}
	wg.Wait()
	res := h.Check(final)
	require.True(t, res.OK(), res.Error(10))
	require.Equal(t, 400, res.Stored)
}
