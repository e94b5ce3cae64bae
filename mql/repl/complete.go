package repl

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/moonmq/moonmq/mql"
)

// namesTTL is how long fetched topic and group names are reused: long
// enough that pressing Tab twice does not query the broker twice, short
// enough that a topic created a moment ago completes.
const namesTTL = 3 * time.Second

// completer implements readline.AutoCompleter. It completes the word
// before the cursor with what the grammar accepts there (found by
// mql.ExpectedAt, so it never offers a keyword that cannot follow), or with
// topic or group names when a name is expected.
type completer struct {
	session *mql.Session

	mu      sync.Mutex
	pending string // earlier lines of the statement being typed
	topics  cached
	groups  cached
}

type cached struct {
	names []string
	at    time.Time
}

func (c *completer) setPending(s string) {
	c.mu.Lock()
	c.pending = s
	c.mu.Unlock()
}

func (c *completer) invalidate() {
	c.mu.Lock()
	c.topics, c.groups = cached{}, cached{}
	c.mu.Unlock()
}

// Do returns the completions of the word ending at pos as suffixes to
// insert, and the length of that word (readline's contract).
func (c *completer) Do(line []rune, pos int) ([][]rune, int) {
	c.mu.Lock()
	pending := c.pending
	c.mu.Unlock()
	src := pending + string(line[:pos])
	word, kind, ok := Candidates(src)
	if !ok {
		return nil, 0
	}
	var names []string
	switch kind.Names {
	case NamesTopics:
		names = c.names(&c.topics, c.session.TopicNames)
	case NamesGroups:
		names = c.names(&c.groups, c.session.GroupNames)
	}
	var out [][]rune
	lower := word != "" && strings.ToLower(word) == word
	for _, k := range kind.Keywords {
		if strings.HasPrefix(k, strings.ToUpper(word)) {
			if lower {
				k = strings.ToLower(k)
			}
			out = append(out, []rune(k[len(word):]+" "))
		}
	}
	for _, n := range names {
		if strings.HasPrefix(n, word) && mql.QuoteName(n) == n {
			out = append(out, []rune(n[len(word):]+" "))
		}
	}
	return out, len([]rune(word))
}

func (c *completer) names(cache *cached, fetch func(context.Context) []string) []string {
	c.mu.Lock()
	if time.Since(cache.at) < namesTTL {
		n := cache.names
		c.mu.Unlock()
		return n
	}
	c.mu.Unlock()
	names := fetch(context.Background())
	c.mu.Lock()
	*cache = cached{names: names, at: time.Now()}
	c.mu.Unlock()
	return names
}

// NameKind says which names complete at a position.
type NameKind int

// Name kinds.
const (
	NamesNone NameKind = iota
	NamesTopics
	NamesGroups
)

// Completion is what may be typed at a position.
type Completion struct {
	Keywords []string
	Names    NameKind
}

// Candidates finds the word being typed at the end of src (possibly empty)
// and what may be typed there. ok is false inside a string or after a
// character that cannot start a word.
func Candidates(src string) (word string, c Completion, ok bool) {
	toks, err := mql.Tokenize("", src)
	if err != nil {
		return "", c, false
	}
	toks = toks[:len(toks)-1] // EOF
	// Only the statement being typed matters: drop everything up to the
	// last ';'.
	for i := len(toks) - 1; i >= 0; i-- {
		if toks[i].Value == ";" && toks[i].Type == punct() {
			toks = toks[i+1:]
			break
		}
	}
	if n := len(toks); n > 0 {
		last := toks[n-1]
		end := last.Pos.Offset + len(rawText(src, last))
		if end == len(src) && (isWordToken(last)) {
			word = src[last.Pos.Offset:end]
			toks = toks[:n-1]
		}
	}
	if word == "" && len(src) > 0 {
		r := []rune(src)
		if last := r[len(r)-1]; !unicode.IsSpace(last) && !strings.ContainsRune("(,=", last) {
			return "", c, false
		}
	}
	exp := mql.ExpectedAt(toks)
	c.Keywords = exp.Keywords
	if exp.Name {
		c.Names = nameKind(toks)
	}
	sort.Strings(c.Keywords)
	return word, c, true
}

func punct() lexer.TokenType { return mql.PunctType }

func isWordToken(t lexer.Token) bool {
	return t.Type == mql.IdentType || t.Type == mql.KeywordType
}

// rawText is the token's source text (keywords' Value is upper-cased).
func rawText(src string, t lexer.Token) string {
	if t.Type == mql.KeywordType {
		return src[t.Pos.Offset : t.Pos.Offset+len(t.Value)]
	}
	return t.Value
}

// nameKind decides between topic and group names from the keyword before
// the name: GROUP means a group; USER, FOR and the principal of GRANT and
// REVOKE mean neither; otherwise a topic.
func nameKind(toks []lexer.Token) NameKind {
	if len(toks) == 0 {
		return NamesNone
	}
	first := toks[0].Value
	prev := ""
	for i := len(toks) - 1; i >= 0; i-- {
		if toks[i].Type == mql.KeywordType {
			prev = toks[i].Value
			break
		}
	}
	switch {
	case prev == "GROUP":
		return NamesGroups
	case prev == "USER" || prev == "FOR" || prev == "SET" || prev == "RESET" || prev == "WITH" || prev == "HEADERS":
		return NamesNone
	case (first == "GRANT" || first == "REVOKE") && (prev == "TO" || prev == "FROM"):
		return NamesNone
	case first == "BEGIN" || first == "CONNECT" || first == "CREATE" && len(toks) >= 2 && toks[1].Value == "TOPIC":
		return NamesNone
	}
	return NamesTopics
}
