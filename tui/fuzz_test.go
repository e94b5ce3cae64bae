package tui

import (
	"strings"
	"testing"
	"unicode"

	"github.com/moonmq/moonmq/net/client"
)

// FuzzRecordRendering feeds arbitrary record bytes through everything that
// shows them: nothing may panic, and no control character from the data may
// reach the terminal (only the newlines and tabs of multi-line text).
func FuzzRecordRendering(f *testing.F) {
	f.Add([]byte("k"), []byte(`{"id":1,"items":[1,2,{"x":null}]}`), "h", []byte("v"))
	f.Add([]byte(nil), []byte("line one\r\nline two\x1b[2J\x9b"), "", []byte{0xff})
	f.Add([]byte{0, 1, 2}, []byte{0xde, 0xad, 0xbe, 0xef}, "\x1b]0;title\x07", []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte, hkey string, hval []byte) {
		for _, b := range [][]byte{key, value, hval, []byte(hkey)} {
			if s := oneLine(b); strings.IndexFunc(s, unicode.IsControl) >= 0 {
				t.Fatalf("oneLine(%q) = %q has a control character", b, s)
			}
			s, _ := prettyValue(b)
			if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }); i >= 0 {
				t.Fatalf("prettyValue(%q) = %q has a control character at %d", b, s, i)
			}
		}
		d, _ := newShared()
		m := newRecords(d)
		m.setSize(60, 10)
		m.reset("t", -1, client.FromEnd(1), true, 1)
		rec := client.Record{Topic: "t", Key: key, Value: value, Headers: []client.Header{{Key: hkey, Value: hval}}}
		m.update(recordsMsg{id: 1, recs: []client.Record{rec}})
		_ = m.view()
		m.update(keyMsg("enter"))
		_ = m.view()
	})
}
