package mql

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/moonmq/moonmq/internal/cli"
)

// root is the grammar's entry point: exactly one statement. Scripts are
// split into statements at ';' tokens before parsing, so that one bad
// statement does not hide the others and every statement keeps its own
// source position.
type root struct {
	Stmt Statement `parser:"@@"`
}

// parser is built once; participle parsers are safe for concurrent use.
var parser = participle.MustBuild[root](
	participle.Lexer(lexDef{}),
	participle.Union[Statement](statementTypes...),
	// Enough to tell CREATE TOPIC IF NOT EXISTS from CREATE USER, and
	// small enough that an error deep inside a statement is reported there
	// rather than as "expected <another statement>".
	participle.UseLookahead(3),
)

// Grammar returns the EBNF participle derives from the AST's struct tags.
func Grammar() string { return parser.String() }

// Parsed is one statement of a script: its AST or why it could not be
// parsed, and its source text.
type Parsed struct {
	Stmt Statement
	Err  *SyntaxError
	// Text is the statement's source, from its first token to its ';'
	// (inclusive) or the end of input.
	Text string
	// Pos is where the statement starts.
	Pos lexer.Position
}

// ParseScript splits src into statements at ';' and parses each. A final
// statement without ';' is accepted: end of input ends it too. Errors are
// per statement; a lexical error ends the script (nothing after it can be
// trusted), so it is the last entry.
func ParseScript(filename, src string) []Parsed { return ParseScriptAt(filename, src, 1) }

// maxNesting bounds parenthesis nesting in a statement; real statements
// nest a handful deep.
const maxNesting = 100

// tooDeep returns the parenthesis that opens nesting level maxNesting+1.
func tooDeep(toks []lexer.Token) (lexer.Token, bool) {
	depth := 0
	for _, t := range toks {
		if t.Type != tokPunct {
			continue
		}
		switch t.Value {
		case "(":
			if depth++; depth > maxNesting {
				return t, true
			}
		case ")":
			depth--
		}
	}
	return lexer.Token{}, false
}

// ParseScriptAt is ParseScript for src that starts on line `line` of the
// named source, so positions are those of the whole source.
func ParseScriptAt(filename, src string, line int) []Parsed {
	toks, lexErr := tokenizeAt(filename, src, line)
	var out []Parsed
	var cur []lexer.Token
	flush := func(end lexer.Token, endOff int) {
		if len(cur) == 0 {
			return
		}
		p := Parsed{Pos: cur[0].Pos, Text: src[cur[0].Pos.Offset:endOff]}
		if deep, ok := tooDeep(cur); ok {
			// The grammar recurses per parenthesis: a few hundred
			// thousand of them would overflow the stack, which kills the
			// process rather than panicking.
			p.Err = newSyntaxError(src, &SyntaxError{Pos: deep.Pos,
				Msg: fmt.Sprintf("parentheses nested deeper than %d", maxNesting)})
			out = append(out, p)
			cur = nil
			return
		}
		toks := append(cur, lexer.Token{Type: tokEOF, Pos: end.Pos})
		stmt, err := parseTokens(toks)
		if err != nil {
			p.Err = newSyntaxError(src, err)
			var ut *participle.UnexpectedTokenError
			if errors.As(err, &ut) {
				p.Err.Msg = unexpectedMessage(ut.Unexpected, toks)
			}
		} else {
			p.Stmt = stmt
			if verr := validate(stmt, cur); verr != nil {
				p.Err = newSyntaxError(src, verr)
				p.Stmt = nil
			}
		}
		out = append(out, p)
		cur = nil
	}
	for _, t := range toks {
		switch {
		case t.Type == tokEOF:
			flush(t, t.Pos.Offset)
		case t.Type == tokPunct && t.Value == ";":
			if len(cur) == 0 {
				continue // empty statement: ";;" is harmless
			}
			flush(t, t.Pos.Offset+1)
		default:
			cur = append(cur, t)
		}
	}
	if lexErr != nil {
		var le *LexError
		errors.As(lexErr, &le)
		p := Parsed{Pos: le.Pos, Err: newSyntaxError(src, lexErr)}
		if len(cur) > 0 {
			p.Pos = cur[0].Pos
		}
		p.Text = src[p.Pos.Offset:]
		out = append(out, p)
	}
	return out
}

// Parse parses exactly one statement (a trailing ';' is optional).
func Parse(src string) (Statement, error) {
	ps := ParseScript("", src)
	switch {
	case len(ps) == 0:
		return nil, &SyntaxError{Msg: "empty statement", Pos: lexer.Position{Line: 1, Column: 1}}
	case ps[0].Err != nil:
		return nil, ps[0].Err
	case len(ps) > 1:
		return nil, newSyntaxError(src, participle.Errorf(ps[1].Pos, "only one statement expected"))
	}
	return ps[0].Stmt, nil
}

// parseTokens parses one statement's tokens (ending with EOF).
func parseTokens(toks []lexer.Token) (Statement, error) {
	pl, err := lexer.Upgrade(&sliceLexer{toks: toks})
	if err != nil {
		return nil, err
	}
	r, err := parser.ParseFromLexer(pl)
	if err != nil {
		return nil, err
	}
	return r.Stmt, nil
}

// Complete reports whether src holds at least one whole statement and
// nothing after the last ';' but whitespace and comments: the REPL keeps
// reading lines until it does. Input that cannot become valid by adding
// more (a stray character) counts as complete, so its error is shown at
// once; an unterminated string does not.
func Complete(src string) bool {
	toks, err := Tokenize("", src)
	if err != nil {
		var le *LexError
		return !(errors.As(err, &le) && le.Incomplete)
	}
	n := len(toks) - 1 // drop EOF
	return n > 0 && toks[n-1].Type == tokPunct && toks[n-1].Value == ";"
}

// SyntaxError is a lexical, grammatical or semantic error at a position,
// with the source line it points into.
type SyntaxError struct {
	Pos lexer.Position
	Msg string
	// Line is the source line containing Pos (without its newline).
	Line string
}

// Error renders "[file:]line:col: message".
func (e *SyntaxError) Error() string {
	prefix := ""
	if e.Pos.Filename != "" {
		prefix = e.Pos.Filename + ":"
	}
	return fmt.Sprintf("%s%d:%d: %s", prefix, e.Pos.Line, e.Pos.Column, e.Msg)
}

// Caret returns the source line and a caret under the error's column, as
// two lines (each ending in a newline), or "" if the line is unknown.
func (e *SyntaxError) Caret() string {
	if e.Line == "" && e.Pos.Column <= 1 {
		return ""
	}
	var pad strings.Builder
	col := 1
	for _, r := range e.Line {
		if col >= e.Pos.Column {
			break
		}
		if r == '\t' {
			pad.WriteRune('\t')
		} else {
			pad.WriteRune(' ')
		}
		col++
	}
	for ; col < e.Pos.Column; col++ {
		pad.WriteRune(' ')
	}
	// Control characters (an ESC sequence in a script) must not reach the
	// terminal; each becomes one '?' so the caret stays aligned.
	line := strings.Map(func(r rune) rune {
		if r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
			return '?'
		}
		return r
	}, e.Line)
	return "  " + line + "\n  " + pad.String() + "^\n"
}

func newSyntaxError(src string, err error) *SyntaxError {
	var se *SyntaxError
	if errors.As(err, &se) {
		if se.Line == "" {
			// A validation error knows where, not the line: show it with
			// the caret, like a grammar error.
			se.Line = sourceLine(src, se.Pos.Offset)
		}
		return se
	}
	e := &SyntaxError{Msg: err.Error()}
	var pe participle.Error
	if errors.As(err, &pe) {
		e.Pos, e.Msg = pe.Position(), pe.Message()
	}
	e.Msg = strings.TrimPrefix(e.Msg, "failed to capture: ")
	e.Line = sourceLine(src, e.Pos.Offset)
	if e.Pos.Line == 0 {
		e.Pos.Line, e.Pos.Column = 1, 1
	}
	return e
}

func sourceLine(src string, off int) string {
	if off < 0 || off > len(src) {
		return ""
	}
	start := strings.LastIndexByte(src[:off], '\n') + 1
	end := strings.IndexByte(src[off:], '\n')
	if end < 0 {
		end = len(src)
	} else {
		end += off
	}
	return strings.TrimRight(src[start:end], "\r")
}

// unexpectedMessage explains an unexpected token in MQL's terms: what was
// found, what would have been accepted there, and a spelling suggestion for
// a misspelt keyword.
func unexpectedMessage(tok lexer.Token, toks []lexer.Token) string {
	var what string
	switch tok.Type {
	case tokEOF:
		what = "unexpected end of statement"
	case tokKeyword:
		what = "unexpected keyword " + tok.Value
	case tokString:
		what = "unexpected string " + tok.Value
	default:
		what = fmt.Sprintf("unexpected %q", tok.Value)
	}
	idx := len(toks) - 1
	for i, t := range toks {
		if t.Pos.Offset == tok.Pos.Offset && t.Type == tok.Type {
			idx = i
			break
		}
	}
	// ExpectedAt costs about a hundred parses of the prefix: skip it for
	// absurdly long statements, where the message is no help anyway.
	var exp Expected
	if idx <= maxExpectedPrefix {
		exp = ExpectedAt(toks[:idx])
	}
	if idx == 0 {
		what += "; expected a statement such as SELECT, SHOW, CREATE or PRODUCE (HELP; lists them)"
		exp.Keywords = statementWords
	} else if d := exp.describe(); d != "" {
		what += "; expected " + d
	}
	if tok.Type == tokIdent || tok.Type == tokKeyword {
		cands := exp.Keywords
		if len(cands) == 0 {
			cands = Keywords
		}
		if s := cli.Suggest(tok.Value, cands); s != "" && s != tok.Value {
			what += "; did you mean " + s + "?"
		}
	}
	if tok.Type == tokKeyword && exp.Name {
		what += fmt.Sprintf("; %s is a keyword: quote it to use it as a name ('%s')", tok.Value, strings.ToLower(tok.Value))
	}
	return what
}

const maxExpectedPrefix = 256

// Expected is what the grammar accepts after some tokens.
type Expected struct {
	// Keywords accepted next, sorted.
	Keywords []string
	// Punct accepted next: ( ) , = * and comparison operators.
	Punct []string
	// Name: an identifier or a quoted name; String: a string literal
	// only; Number and Quantity: an integer, with or without a unit.
	Name, String, Number, Quantity bool
	// End: the statement may end here.
	End bool
}

var probePunct = []string{"(", ")", ",", "=", "*", "<", ">", "<=", ">=", "!=", "<>"}

// ExpectedAt reports what may follow prefix (the tokens of an unfinished
// statement, without EOF). It works by trial: each candidate token is
// appended and the result parsed; a candidate is acceptable when the parse
// gets past it. That keeps error messages and completion exact without a
// second description of the grammar.
func ExpectedAt(prefix []lexer.Token) Expected {
	var pos lexer.Position
	if n := len(prefix); n > 0 {
		last := prefix[n-1]
		pos = last.Pos
		pos.Offset += len(last.Value) + 1
		pos.Column += len([]rune(last.Value)) + 1
	} else {
		pos = lexer.Position{Line: 1, Column: 1}
	}
	accepts := func(typ lexer.TokenType, val string) bool {
		toks := make([]lexer.Token, 0, len(prefix)+2)
		toks = append(toks, prefix...)
		toks = append(toks, lexer.Token{Type: typ, Value: val, Pos: pos})
		end := pos
		end.Offset += len(val) + 1
		end.Column += len([]rune(val)) + 1
		toks = append(toks, lexer.Token{Type: tokEOF, Pos: end})
		_, err := parseTokens(toks)
		if err == nil {
			return true
		}
		var pe participle.Error
		if errors.As(err, &pe) {
			return pe.Position().Offset > pos.Offset
		}
		return false
	}
	var e Expected
	if len(prefix) > 0 {
		toks := append(append([]lexer.Token(nil), prefix...), lexer.Token{Type: tokEOF, Pos: pos})
		_, err := parseTokens(toks)
		e.End = err == nil
	}
	for _, k := range Keywords {
		if accepts(tokKeyword, k) {
			e.Keywords = append(e.Keywords, k)
		}
	}
	for _, p := range probePunct {
		if accepts(tokPunct, p) {
			e.Punct = append(e.Punct, p)
		}
	}
	ident := accepts(tokIdent, "x")
	str := accepts(tokString, "'x'")
	e.Name = ident
	e.String = str && !ident
	e.Number = accepts(tokNumber, "1")
	e.Quantity = accepts(tokQuantity, "1s")
	return e
}

func (e Expected) describe() string {
	var parts []string
	if e.Name {
		parts = append(parts, "a name")
	}
	if e.String {
		parts = append(parts, "a string")
	}
	if e.Number && e.Quantity {
		parts = append(parts, "a number or duration")
	} else if e.Number {
		parts = append(parts, "a number")
	}
	for _, p := range e.Punct {
		parts = append(parts, fmt.Sprintf("%q", p))
	}
	const maxKeywords = 12
	kws := e.Keywords
	more := 0
	if len(kws) > maxKeywords {
		more = len(kws) - maxKeywords
		kws = kws[:maxKeywords]
	}
	parts = append(parts, kws...)
	if more > 0 {
		parts = append(parts, fmt.Sprintf("%d more keywords", more))
	}
	if e.End {
		parts = append(parts, "';'")
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// statementWords are the words a statement can start with.
var statementWords = []string{
	"ABORT", "ALTER", "ASSERT", "BEGIN", "COMMIT", "CONNECT", "CREATE", "DESCRIBE",
	"DISCONNECT", "DROP", "EXIT", "FETCH", "GRANT", "HELP", "JOIN", "LEAVE", "MOVE",
	"PRODUCE", "QUIT", "RESET", "REVOKE", "SELECT", "SET", "SHOW", "SUBSCRIBE", "USE",
}
