package mql

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// Token types produced by the MQL lexer. Whitespace and comments are dropped
// by the lexer, so the parser never sees them.
const (
	tokEOF      = lexer.EOF
	tokKeyword  = lexer.TokenType(-2 - iota) // a reserved word; Value is upper case
	tokIdent                                 // a bare name: orders, retention.ms, my-topic
	tokString                                // '...' or "..."; Value keeps the quotes (see Str)
	tokNumber                                // an integer, optionally negative: 42, -1
	tokQuantity                              // an integer with a unit: 7d, 512MiB, 500ms
	tokPunct                                 // ; ( ) , = * < > <= >= != <>
)

// Exported token types, for tools built on Tokenize (completion).
const (
	KeywordType = tokKeyword
	IdentType   = tokIdent
	StringType  = tokString
	PunctType   = tokPunct
)

var symbols = map[string]lexer.TokenType{
	"EOF":      tokEOF,
	"Keyword":  tokKeyword,
	"Ident":    tokIdent,
	"String":   tokString,
	"Number":   tokNumber,
	"Quantity": tokQuantity,
	"Punct":    tokPunct,
}

// Keywords is every reserved word of MQL, sorted. A name spelled like one of
// them must be quoted ('select'). The grammar test checks that this list and
// the literals of the grammar agree.
var Keywords = []string{
	"ABORT", "ACLS", "ADD", "ALTER", "AND", "ASSERT", "AT",
	"BEGIN", "BROKERS", "CA", "CLIENT", "CLUSTER", "COMMIT", "COMMITTED", "CONNECT", "COUNT", "CREATE",
	"DEFAULT", "DESCRIBE", "DISCONNECT", "DROP", "EARLIEST", "EXISTS", "EXIT",
	"FETCH", "FOR", "FORMAT", "FROM", "GRANT", "GROUP", "GROUPS",
	"HEADER", "HEADERS", "HELP", "IF", "INTO", "IP", "IS", "ISOLATION", "JOIN", "KEY",
	"LATEST", "LEAVE", "LIKE", "LIMIT", "MECHANISM", "MOVE", "NOT", "NULL",
	"OFFSET", "OFFSETS", "ON", "OR", "PARTITION", "PARTITIONS", "PASSWORD",
	"PREFIXED", "PRODUCE", "QUIT", "QUOTA", "QUOTAS", "READ", "REASSIGNMENTS", "REPLICAS", "RESET",
	"REVOKE", "SELECT", "SET", "SHOW", "SUBSCRIBE", "TIMEOUT", "TIMESTAMP",
	"TLS", "TO", "TOPIC", "TOPICS", "TRANSACTION", "TRANSACTIONS", "UNCOMMITTED", "USE", "USER", "USERS",
	"VALUE", "VALUES", "WHERE", "WITH",
}

var keywordSet = func() map[string]bool {
	m := make(map[string]bool, len(Keywords))
	for _, k := range Keywords {
		m[k] = true
	}
	if !sort.StringsAreSorted(Keywords) {
		panic("mql: Keywords must be sorted")
	}
	return m
}()

// IsKeyword reports whether word (any case) is reserved.
func IsKeyword(word string) bool { return isASCII(word) && keywordSet[strings.ToUpper(word)] }

// lexDef is the participle lexer.Definition for MQL. It is hand-written
// rather than regexp-based because MQL's rules are contextual in small ways
// (a run of digits followed by letters is a quantity, "--" ends an
// identifier and starts a comment, keywords are reclassified) and because a
// hand-written lexer gives precise messages for unterminated strings.
type lexDef struct{}

func (lexDef) Symbols() map[string]lexer.TokenType { return symbols }

func (lexDef) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filename, err)
	}
	return lexDef{}.LexString(filename, string(b))
}

func (lexDef) LexString(filename, input string) (lexer.Lexer, error) {
	toks, err := Tokenize(filename, input)
	if err != nil {
		return nil, err
	}
	return &sliceLexer{toks: toks}, nil
}

// sliceLexer replays already lexed tokens; the last one is EOF.
type sliceLexer struct {
	toks []lexer.Token
	i    int
}

func (l *sliceLexer) Next() (lexer.Token, error) {
	if l.i >= len(l.toks) {
		return l.toks[len(l.toks)-1], nil
	}
	t := l.toks[l.i]
	l.i++
	return t, nil
}

// LexError is a lexical error (bad character, unterminated string) at Pos.
// Incomplete is true when more input could make it valid (an unterminated
// string), which the REPL uses to keep reading lines.
type LexError struct {
	Pos        lexer.Position
	Msg        string
	Incomplete bool
}

func (e *LexError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.Pos.Filename, e.Pos.Line, e.Pos.Column, e.Msg)
}

// Message and Position make LexError a participle.Error.
func (e *LexError) Message() string          { return e.Msg }
func (e *LexError) Position() lexer.Position { return e.Pos }

// Tokenize splits input into tokens following MQL's lexical rules. The
// returned slice always ends with an EOF token (whose position is the end of
// input). Comments and whitespace are dropped.
func Tokenize(filename, input string) ([]lexer.Token, error) {
	return tokenizeAt(filename, input, 1)
}

// tokenizeAt is Tokenize for input that starts on line `line` of a larger
// source (the REPL and stdin scripts parse chunk by chunk).
func tokenizeAt(filename, input string, line int) ([]lexer.Token, error) {
	s := scanner{src: input, pos: lexer.Position{Filename: filename, Line: line, Column: 1}}
	var toks []lexer.Token
	for {
		t, err := s.next()
		if err != nil {
			return toks, err
		}
		toks = append(toks, t)
		if t.Type == tokEOF {
			return toks, nil
		}
	}
}

type scanner struct {
	src string
	pos lexer.Position // position of src[pos.Offset]
}

func (s *scanner) peek(n int) byte {
	if s.pos.Offset+n < len(s.src) {
		return s.src[s.pos.Offset+n]
	}
	return 0
}

// advance moves over n bytes, keeping line and column (in runes) right.
func (s *scanner) advance(n int) {
	end := min(s.pos.Offset+n, len(s.src))
	for s.pos.Offset < end {
		r, size := utf8.DecodeRuneInString(s.src[s.pos.Offset:])
		s.pos.Offset += size
		if r == '\n' {
			s.pos.Line++
			s.pos.Column = 1
		} else {
			s.pos.Column++
		}
	}
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool {
	return r == '_' || r == '.' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func (s *scanner) next() (lexer.Token, error) {
	// Skip whitespace and comments.
	for s.pos.Offset < len(s.src) {
		c := s.src[s.pos.Offset]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			s.advance(1)
		case c == '-' && s.peek(1) == '-':
			i := strings.IndexByte(s.src[s.pos.Offset:], '\n')
			if i < 0 {
				i = len(s.src) - s.pos.Offset
			}
			s.advance(i)
		default:
			goto token
		}
	}
	return lexer.Token{Type: tokEOF, Pos: s.pos}, nil

token:
	start := s.pos
	rest := s.src[s.pos.Offset:]
	c := rest[0]
	switch {
	case c == '\'' || c == '"':
		return s.quoted(start, c)
	case isDigit(c) || (c == '-' && isDigit(s.peek(1))):
		return s.number(start)
	}
	r, size := utf8.DecodeRuneInString(rest)
	if isIdentStart(r) {
		n := s.identLen(size)
		word := rest[:n]
		s.advance(n)
		// Keywords are ASCII: "ſelect" upper-cases to SELECT but is a name.
		if up := strings.ToUpper(word); keywordSet[up] && isASCII(word) {
			return lexer.Token{Type: tokKeyword, Value: up, Pos: start}, nil
		}
		return lexer.Token{Type: tokIdent, Value: word, Pos: start}, nil
	}
	for _, p := range []string{"<=", ">=", "!=", "<>"} {
		if strings.HasPrefix(rest, p) {
			s.advance(2)
			return lexer.Token{Type: tokPunct, Value: p, Pos: start}, nil
		}
	}
	if strings.IndexByte(";(),=*<>", c) >= 0 {
		s.advance(1)
		return lexer.Token{Type: tokPunct, Value: string(c), Pos: start}, nil
	}
	msg := fmt.Sprintf("unexpected character %q", r)
	if r == utf8.RuneError && size <= 1 {
		msg = fmt.Sprintf("invalid UTF-8 byte 0x%02x", c)
	}
	return lexer.Token{}, &LexError{Pos: start, Msg: msg}
}

// identLen returns the byte length of the identifier starting at the cursor
// whose first rune is first bytes long. "--" ends it: it starts a comment.
func (s *scanner) identLen(first int) int {
	rest := s.src[s.pos.Offset:]
	n := first
	for n < len(rest) {
		r, size := utf8.DecodeRuneInString(rest[n:])
		if !isIdentPart(r) || (r == '-' && n+1 < len(rest) && rest[n+1] == '-') {
			break
		}
		n += size
	}
	return n
}

// number lexes -?digits, then: nothing more (Number), letters only
// (Quantity: 7d, 512MiB), or further name characters (an identifier that
// starts with a digit, like 2024-orders; only without a sign).
func (s *scanner) number(start lexer.Position) (lexer.Token, error) {
	rest := s.src[s.pos.Offset:]
	n := 0
	if rest[0] == '-' {
		n++
	}
	for n < len(rest) && isDigit(rest[n]) {
		n++
	}
	digits := n
	for n < len(rest) && (rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= 'A' && rest[n] <= 'Z') {
		n++
	}
	letters := n > digits
	// More name characters: an identifier (or an error for a signed one).
	if n < len(rest) {
		r, _ := utf8.DecodeRuneInString(rest[n:])
		if isIdentPart(r) && !(r == '-' && n+1 < len(rest) && rest[n+1] == '-') {
			if rest[0] == '-' {
				s.advance(n)
				return lexer.Token{}, &LexError{Pos: start, Msg: fmt.Sprintf("invalid number %q", rest[:n]+string(r))}
			}
			m := s.identLen(n)
			s.advance(m)
			return lexer.Token{Type: tokIdent, Value: rest[:m], Pos: start}, nil
		}
	}
	s.advance(n)
	if letters {
		return lexer.Token{Type: tokQuantity, Value: rest[:n], Pos: start}, nil
	}
	return lexer.Token{Type: tokNumber, Value: rest[:n], Pos: start}, nil
}

// quoted lexes a string delimited by q in which qq stands for q.
func (s *scanner) quoted(start lexer.Position, q byte) (lexer.Token, error) {
	rest := s.src[s.pos.Offset:]
	i := 1
	for {
		j := strings.IndexByte(rest[i:], q)
		if j < 0 {
			s.advance(len(rest))
			return lexer.Token{}, &LexError{Pos: start, Msg: "unterminated string (a quote inside a string is written twice: 'it''s')", Incomplete: true}
		}
		i += j + 1
		if i < len(rest) && rest[i] == q {
			i++
			continue
		}
		break
	}
	s.advance(i)
	return lexer.Token{Type: tokString, Value: rest[:i], Pos: start}, nil
}

// unquote strips the delimiters of a String token and undoubles quotes.
func unquote(raw string) string {
	if len(raw) < 2 {
		return raw
	}
	q := raw[:1]
	return strings.ReplaceAll(raw[1:len(raw)-1], q+q, q)
}

// Quote renders s as an MQL string literal.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// QuoteName renders a name bare when it lexes back as the same identifier,
// quoted otherwise (keywords, empty names, odd characters).
func QuoteName(name string) string {
	if isBareName(name) {
		return name
	}
	return Quote(name)
}

func isBareName(name string) bool {
	if name == "" || IsKeyword(name) {
		return false
	}
	toks, err := Tokenize("", name)
	return err == nil && len(toks) == 2 && toks[0].Type == tokIdent && toks[0].Value == name
}
