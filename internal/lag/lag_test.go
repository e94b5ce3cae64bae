package lag

import "testing"

func TestOf(t *testing.T) {
	for _, c := range []struct {
		committed, end, want int64
	}{
		{committed: 5, end: 8, want: 3},
		{committed: 8, end: 8, want: 0},
		{committed: 10, end: 8, want: 0}, // records deleted below the commit
		{committed: -1, end: 8, want: Unknown},
		{committed: 5, end: -1, want: Unknown},
	} {
		if got := Of(c.committed, c.end); got != c.want {
			t.Errorf("Of(%d, %d) = %d, want %d", c.committed, c.end, got, c.want)
		}
	}
	var total int64
	for _, l := range []int64{3, Unknown, 0, 4} {
		total = Add(total, l)
	}
	if total != 7 {
		t.Errorf("total = %d, want 7: unknown lag adds nothing", total)
	}
}
