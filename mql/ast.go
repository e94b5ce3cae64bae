package mql

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"
)

// The AST. Every node records where it starts (Pos, filled by participle);
// positions are excluded from AST equality in the round-trip tests. The
// struct tags are the grammar: see testdata/grammar.ebnf for the EBNF that
// participle derives from them.

// Statement is one MQL statement (without its terminating ';').
type Statement interface {
	// Position is where the statement starts.
	Position() lexer.Position
	stmt()
}

// Str is a string literal, unquoted.
type Str string

// Capture unquotes a String token.
func (s *Str) Capture(v []string) error { *s = Str(unquote(strings.Join(v, ""))); return nil }

// Name is a topic, group, user or config name: an identifier or a quoted
// string.
type Name string

// Capture takes an Ident as is and unquotes a String.
func (n *Name) Capture(v []string) error {
	raw := strings.Join(v, "")
	if strings.HasPrefix(raw, "'") || strings.HasPrefix(raw, `"`) {
		raw = unquote(raw)
	}
	*n = Name(raw)
	return nil
}

// Int is an integer literal.
type Int int64

// Capture parses a Number token.
func (i *Int) Capture(v []string) error {
	n, err := strconv.ParseInt(strings.Join(v, ""), 10, 64)
	if err != nil {
		return fmt.Errorf("number %s is out of range", strings.Join(v, ""))
	}
	*i = Int(n)
	return nil
}

// ---- Session ----

// Connect switches the session to another cluster.
type Connect struct {
	Pos       lexer.Position
	Addr      Str  `parser:"\"CONNECT\" @String"`
	User      *Str `parser:"( \"USER\" @String"`
	Password  *Str `parser:"  \"PASSWORD\" @String )?"`
	Mechanism *Str `parser:"( \"MECHANISM\" @String )?"`
	TLS       bool `parser:"( @\"TLS\""`
	CA        *Str `parser:"  ( \"CA\" @String )? )?"`
}

// Disconnect closes the session's connection.
type Disconnect struct {
	Pos lexer.Position
	Kw  bool `parser:"@\"DISCONNECT\""`
}

// UseGroup sets the session's default group.
type UseGroup struct {
	Pos   lexer.Position
	Group Name `parser:"\"USE\" \"GROUP\" @(Ident | String)"`
}

// SetFormat sets the output format: table, json or csv.
type SetFormat struct {
	Pos    lexer.Position
	Format Name `parser:"\"SET\" \"FORMAT\" @(Ident | String)"`
}

// SetIsolation sets the isolation of the session's reads (SELECT, FETCH,
// SUBSCRIBE).
type SetIsolation struct {
	Pos       lexer.Position
	Isolation *Isolation `parser:"\"SET\" \"ISOLATION\" @@"`
}

// Isolation is READ COMMITTED or READ UNCOMMITTED: Kafka's read_committed
// and read_uncommitted.
type Isolation struct {
	Pos       lexer.Position
	Committed bool `parser:"\"READ\" ( @\"COMMITTED\" | \"UNCOMMITTED\" )"`
}

// Help prints the overview or one statement's syntax.
type Help struct {
	Pos   lexer.Position
	Kw    bool     `parser:"@\"HELP\""`
	Words []string `parser:"@(Keyword | Ident)*"`
}

// Exit ends the session.
type Exit struct {
	Pos  lexer.Position
	Word string `parser:"@(\"EXIT\" | \"QUIT\")"`
}

// ---- Topics ----

// Config is one key = value pair of WITH (...) or SET (...).
type Config struct {
	Pos   lexer.Position
	Key   Name         `parser:"@(Ident | String) \"=\""`
	Value *ConfigValue `parser:"@@"`
}

// ConfigValue is a config value: a string, a number, a quantity with a unit
// (7d, 512MiB; converted for keys ending in .ms and .bytes) or a bare word.
type ConfigValue struct {
	Pos    lexer.Position
	Str    *Str    `parser:"  @String"`
	Number *string `parser:"| @Number"`
	Qty    *string `parser:"| @Quantity"`
	Word   *string `parser:"| @Ident"`
}

// CreateTopic creates a topic.
type CreateTopic struct {
	Pos         lexer.Position
	IfNotExists bool      `parser:"\"CREATE\" \"TOPIC\" @(\"IF\" \"NOT\" \"EXISTS\")?"`
	Name        Name      `parser:"@(Ident | String)"`
	Partitions  *Int      `parser:"( \"PARTITIONS\" @Number )?"`
	Replicas    *Int      `parser:"( \"REPLICAS\" @Number )?"`
	Configs     []*Config `parser:"( \"WITH\" \"(\" @@ ( \",\" @@ )* \")\" )?"`
}

// DropTopic deletes a topic.
type DropTopic struct {
	Pos      lexer.Position
	IfExists bool `parser:"\"DROP\" \"TOPIC\" @(\"IF\" \"EXISTS\")?"`
	Name     Name `parser:"@(Ident | String)"`
}

// AlterTopic changes configs or adds partitions.
type AlterTopic struct {
	Pos   lexer.Position
	Name  Name      `parser:"\"ALTER\" \"TOPIC\" @(Ident | String)"`
	Set   []*Config `parser:"( \"SET\" \"(\" @@ ( \",\" @@ )* \")\""`
	Reset []Name    `parser:"| \"RESET\" \"(\" @(Ident | String) ( \",\" @(Ident | String) )* \")\""`
	Add   *Int      `parser:"| \"ADD\" \"PARTITIONS\" @Number )"`
}

// ShowTopics lists topics.
type ShowTopics struct {
	Pos  lexer.Position
	Kw   bool `parser:"\"SHOW\" @\"TOPICS\""`
	Like *Str `parser:"( \"LIKE\" @String )?"`
}

// DescribeTopic shows a topic's partitions and configs.
type DescribeTopic struct {
	Pos  lexer.Position
	Name Name `parser:"\"DESCRIBE\" \"TOPIC\" @(Ident | String)"`
}

// ShowOffsets lists each partition's log start and end, or the offsets at a
// time.
type ShowOffsets struct {
	Pos  lexer.Position
	Name Name `parser:"\"SHOW\" \"OFFSETS\" @(Ident | String)"`
	At   *Str `parser:"( \"AT\" \"TIMESTAMP\" @String )?"`
}

// ---- Records ----

// Literal is a string, integer or NULL.
type Literal struct {
	Pos  lexer.Position
	Str  *Str `parser:"  @String"`
	Int  *Int `parser:"| @Number"`
	Null bool `parser:"| @\"NULL\""`
}

// Header is one name = value pair of HEADERS (...).
type Header struct {
	Pos   lexer.Position
	Key   Name     `parser:"@(Ident | String) \"=\""`
	Value *Literal `parser:"@@"`
}

// KeyValue is one (key, value) tuple of PRODUCE ... VALUES.
type KeyValue struct {
	Pos   lexer.Position
	Key   *Literal `parser:"\"(\" @@ \",\""`
	Value *Literal `parser:"@@ \")\""`
}

// Produce writes one record (KEY/VALUE form) or one batch (VALUES form).
type Produce struct {
	Pos       lexer.Position
	Topic     Name        `parser:"\"PRODUCE\" \"INTO\" @(Ident | String)"`
	Partition *Int        `parser:"( \"PARTITION\" @Number )?"`
	Rows      []*KeyValue `parser:"( \"VALUES\" @@ ( \",\" @@ )*"`
	Key       *Literal    `parser:"| ( \"KEY\" @@ )?"`
	Value     *Literal    `parser:"  \"VALUE\" @@"`
	Headers   []*Header   `parser:"  ( \"HEADERS\" \"(\" @@ ( \",\" @@ )* \")\" )?"`
	Timestamp *Str        `parser:"  ( \"TIMESTAMP\" @String )? )"`
}

// Column is one item of a SELECT list.
type Column struct {
	Pos    lexer.Position
	Star   bool   `parser:"  @\"*\""`
	Count  bool   `parser:"| @\"COUNT\" \"(\" \"*\" \")\""`
	Header *Str   `parser:"| \"HEADER\" \"(\" @String \")\""`
	Field  string `parser:"| @(\"OFFSET\" | \"PARTITION\" | \"KEY\" | \"VALUE\" | \"TIMESTAMP\" | \"HEADERS\")"`
}

// StartAt is where a read starts: FROM EARLIEST | LATEST | OFFSET n |
// TIMESTAMP '...'.
type StartAt struct {
	Pos       lexer.Position
	Earliest  bool `parser:"  @\"EARLIEST\""`
	Latest    bool `parser:"| @\"LATEST\""`
	Offset    *Int `parser:"| \"OFFSET\" @Number"`
	Timestamp *Str `parser:"| \"TIMESTAMP\" @String"`
}

// Expr is a boolean expression: terms joined by OR.
type Expr struct {
	Pos lexer.Position
	Or  []*AndExpr `parser:"@@ ( \"OR\" @@ )*"`
}

// AndExpr is factors joined by AND.
type AndExpr struct {
	Pos lexer.Position
	And []*NotExpr `parser:"@@ ( \"AND\" @@ )*"`
}

// NotExpr is an optionally negated term.
type NotExpr struct {
	Pos  lexer.Position
	Not  bool  `parser:"@\"NOT\"?"`
	Term *Term `parser:"@@"`
}

// Term is a parenthesised expression or a comparison.
type Term struct {
	Pos   lexer.Position
	Paren *Expr       `parser:"  \"(\" @@ \")\""`
	Cmp   *Comparison `parser:"| @@"`
}

// Operand is what a comparison tests: a record field or header('name').
type Operand struct {
	Pos    lexer.Position
	Header *Str   `parser:"  \"HEADER\" \"(\" @String \")\""`
	Field  string `parser:"| @(\"OFFSET\" | \"PARTITION\" | \"KEY\" | \"VALUE\" | \"TIMESTAMP\")"`
}

// Comparison is operand op literal, operand [NOT] LIKE 'pattern' or
// operand IS [NOT] NULL.
type Comparison struct {
	Pos     lexer.Position
	Left    *Operand `parser:"@@"`
	Op      string   `parser:"( @(\"=\" | \"!=\" | \"<>\" | \"<=\" | \">=\" | \"<\" | \">\")"`
	Right   *Literal `parser:"  @@"`
	NotLike bool     `parser:"| ( @\"NOT\"?"`
	Like    *Str     `parser:"    \"LIKE\" @String )"`
	Is      bool     `parser:"| ( @\"IS\""`
	IsNot   bool     `parser:"    @\"NOT\"? \"NULL\" ) )"`
}

// Select reads a bounded range of records.
type Select struct {
	Pos       lexer.Position
	Columns   []*Column  `parser:"\"SELECT\" @@ ( \",\" @@ )*"`
	Topic     Name       `parser:"\"FROM\" @(Ident | String)"`
	Partition *Int       `parser:"( \"PARTITION\" @Number )?"`
	Where     *Expr      `parser:"( \"WHERE\" @@ )?"`
	From      *StartAt   `parser:"( \"FROM\" @@ )?"`
	Limit     *Int       `parser:"( \"LIMIT\" @Number )?"`
	Isolation *Isolation `parser:"( \"ISOLATION\" @@ )?"`
}

// Fetch reads from a group's committed position and commits past what it
// returned.
type Fetch struct {
	Pos   lexer.Position
	Topic Name  `parser:"\"FETCH\" \"FROM\" @(Ident | String)"`
	Group *Name `parser:"( \"GROUP\" @(Ident | String) )?"`
	Limit *Int  `parser:"( \"LIMIT\" @Number )?"`
}

// Subscribe streams records as they arrive.
type Subscribe struct {
	Pos     lexer.Position
	Topic   Name     `parser:"\"SUBSCRIBE\" \"TO\"? @(Ident | String)"`
	Group   *Name    `parser:"( \"GROUP\" @(Ident | String) )?"`
	Where   *Expr    `parser:"( \"WHERE\" @@ )?"`
	From    *StartAt `parser:"( \"FROM\" @@ )?"`
	Timeout *string  `parser:"( \"TIMEOUT\" @(Number | Quantity) )?"`
	Limit   *Int     `parser:"( \"LIMIT\" @Number )?"`
}

// Assert fails the script unless the query's single value compares true.
type Assert struct {
	Pos   lexer.Position
	Query *Select  `parser:"\"ASSERT\" \"(\" @@ \")\""`
	Op    string   `parser:"@(\"=\" | \"!=\" | \"<>\" | \"<=\" | \">=\" | \"<\" | \">\")"`
	Want  *Literal `parser:"@@"`
}

// ---- Groups ----

// ShowGroups lists groups.
type ShowGroups struct {
	Pos  lexer.Position
	Kw   bool `parser:"\"SHOW\" @\"GROUPS\""`
	Like *Str `parser:"( \"LIKE\" @String )?"`
}

// DescribeGroup shows a group's members and offsets.
type DescribeGroup struct {
	Pos  lexer.Position
	Name Name `parser:"\"DESCRIBE\" \"GROUP\" @(Ident | String)"`
}

// JoinGroup makes the session a member of a group.
type JoinGroup struct {
	Pos    lexer.Position
	Group  Name   `parser:"\"JOIN\" \"GROUP\" @(Ident | String)"`
	Topics []Name `parser:"\"ON\" @(Ident | String) ( \",\" @(Ident | String) )*"`
}

// LeaveGroup ends the session's group membership.
type LeaveGroup struct {
	Pos   lexer.Position
	Kw    bool  `parser:"\"LEAVE\" @\"GROUP\""`
	Group *Name `parser:"@(Ident | String)?"`
}

// CommitOffset sets a group's committed offset for one partition.
type CommitOffset struct {
	Pos       lexer.Position
	Topic     Name  `parser:"\"COMMIT\" @(Ident | String)"`
	Partition Int   `parser:"\"PARTITION\" @Number"`
	Offset    Int   `parser:"\"OFFSET\" @Number"`
	Group     *Name `parser:"( \"GROUP\" @(Ident | String) )?"`
}

// ResetGroup moves a group's committed offsets.
type ResetGroup struct {
	Pos   lexer.Position
	Group Name     `parser:"\"RESET\" \"GROUP\" @(Ident | String)"`
	Topic *Name    `parser:"( \"TOPIC\" @(Ident | String) )?"`
	To    *StartAt `parser:"\"TO\" @@"`
}

// DropGroup deletes a group.
type DropGroup struct {
	Pos      lexer.Position
	IfExists bool `parser:"\"DROP\" \"GROUP\" @(\"IF\" \"EXISTS\")?"`
	Name     Name `parser:"@(Ident | String)"`
}

// ---- Transactions ----

// BeginTxn starts a transaction; PRODUCE joins it until COMMIT/ABORT.
type BeginTxn struct {
	Pos lexer.Position
	Kw  bool  `parser:"\"BEGIN\" @\"TRANSACTION\""`
	ID  *Name `parser:"@(Ident | String)?"`
}

// CommitTxn commits the open transaction.
type CommitTxn struct {
	Pos lexer.Position
	Kw  bool `parser:"\"COMMIT\" @\"TRANSACTION\""`
}

// AbortTxn aborts the open transaction.
type AbortTxn struct {
	Pos lexer.Position
	Kw  bool `parser:"\"ABORT\" @\"TRANSACTION\""`
}

// ShowTransactions lists the transactional ids the brokers coordinate.
type ShowTransactions struct {
	Pos  lexer.Position
	Kw   bool `parser:"\"SHOW\" @\"TRANSACTIONS\""`
	Like *Str `parser:"( \"LIKE\" @String )?"`
}

// DescribeTransaction shows one transactional id's state and partitions.
type DescribeTransaction struct {
	Pos  lexer.Position
	Name Name `parser:"\"DESCRIBE\" \"TRANSACTION\" @(Ident | String)"`
}

// ---- Security ----

// CreateUser creates or updates a SCRAM user.
type CreateUser struct {
	Pos       lexer.Position
	Name      Name `parser:"\"CREATE\" \"USER\" @(Ident | String)"`
	Password  Str  `parser:"\"PASSWORD\" @String"`
	Mechanism *Str `parser:"( \"MECHANISM\" @String )?"`
}

// DropUser deletes a SCRAM user's credentials.
type DropUser struct {
	Pos       lexer.Position
	Name      Name `parser:"\"DROP\" \"USER\" @(Ident | String)"`
	Mechanism *Str `parser:"( \"MECHANISM\" @String )?"`
}

// ShowUsers lists SCRAM users.
type ShowUsers struct {
	Pos lexer.Position
	Kw  bool `parser:"\"SHOW\" @\"USERS\""`
}

// Resource is what an ACL applies to.
type Resource struct {
	Pos      lexer.Position
	Kind     string `parser:"( @(\"TOPIC\" | \"GROUP\")"`
	Name     Name   `parser:"  @(Ident | String)"`
	Prefixed bool   `parser:"  @\"PREFIXED\"?"`
	Cluster  bool   `parser:"| @\"CLUSTER\" )"`
}

// Grant adds allow ACLs.
type Grant struct {
	Pos       lexer.Position
	Ops       []Name    `parser:"\"GRANT\" @(Ident | \"CREATE\" | \"ALTER\" | \"DESCRIBE\" | \"READ\") ( \",\" @(Ident | \"CREATE\" | \"ALTER\" | \"DESCRIBE\" | \"READ\") )*"`
	Resource  *Resource `parser:"\"ON\" @@"`
	Principal Name      `parser:"\"TO\" @(Ident | String)"`
}

// Revoke deletes allow ACLs.
type Revoke struct {
	Pos       lexer.Position
	Ops       []Name    `parser:"\"REVOKE\" @(Ident | \"CREATE\" | \"ALTER\" | \"DESCRIBE\" | \"READ\") ( \",\" @(Ident | \"CREATE\" | \"ALTER\" | \"DESCRIBE\" | \"READ\") )*"`
	Resource  *Resource `parser:"\"ON\" @@"`
	Principal Name      `parser:"\"FROM\" @(Ident | String)"`
}

// ShowAcls lists ACLs.
type ShowAcls struct {
	Pos       lexer.Position
	Kw        bool  `parser:"\"SHOW\" @\"ACLS\""`
	Principal *Name `parser:"( \"FOR\" @(Ident | String) )?"`
}

// ---- Cluster ----

// ShowBrokers lists the brokers.
type ShowBrokers struct {
	Pos lexer.Position
	Kw  bool `parser:"\"SHOW\" @\"BROKERS\""`
}

// ShowCluster shows the cluster id and controller.
type ShowCluster struct {
	Pos lexer.Position
	Kw  bool `parser:"\"SHOW\" @\"CLUSTER\""`
}

// MovePartition reassigns a partition's replicas.
type MovePartition struct {
	Pos       lexer.Position
	Topic     Name  `parser:"\"MOVE\" \"PARTITION\" @(Ident | String)"`
	Partition Int   `parser:"@Number"`
	Brokers   []Int `parser:"\"TO\" \"BROKERS\" \"(\" @Number ( \",\" @Number )* \")\""`
}

// ShowReassignments lists reassignments in progress.
type ShowReassignments struct {
	Pos lexer.Position
	Kw  bool `parser:"\"SHOW\" @\"REASSIGNMENTS\""`
}

// statementTypes lists the union members in the order the parser tries
// them (participle takes the first that matches).
var statementTypes = []Statement{
	&Connect{}, &Disconnect{}, &UseGroup{}, &SetFormat{}, &SetIsolation{}, &Help{}, &Exit{},
	&CreateTopic{}, &CreateUser{}, &DropTopic{}, &DropGroup{}, &DropUser{},
	&AlterTopic{}, &ShowTopics{}, &ShowOffsets{}, &ShowGroups{}, &ShowUsers{},
	&ShowAcls{}, &ShowBrokers{}, &ShowCluster{}, &ShowReassignments{}, &ShowTransactions{},
	&DescribeTopic{}, &DescribeGroup{}, &DescribeTransaction{},
	&Produce{}, &Select{}, &Fetch{}, &Subscribe{}, &Assert{},
	&JoinGroup{}, &LeaveGroup{}, &CommitTxn{}, &CommitOffset{}, &ResetGroup{},
	&BeginTxn{}, &AbortTxn{}, &Grant{}, &Revoke{}, &MovePartition{},
	&SetQuota{}, &ResetQuota{}, &ShowQuotas{},
}

func (s *Connect) Position() lexer.Position             { return s.Pos }
func (s *Disconnect) Position() lexer.Position          { return s.Pos }
func (s *UseGroup) Position() lexer.Position            { return s.Pos }
func (s *SetFormat) Position() lexer.Position           { return s.Pos }
func (s *SetIsolation) Position() lexer.Position        { return s.Pos }
func (s *ShowTransactions) Position() lexer.Position    { return s.Pos }
func (s *DescribeTransaction) Position() lexer.Position { return s.Pos }
func (s *Help) Position() lexer.Position                { return s.Pos }
func (s *Exit) Position() lexer.Position                { return s.Pos }
func (s *CreateTopic) Position() lexer.Position         { return s.Pos }
func (s *DropTopic) Position() lexer.Position           { return s.Pos }
func (s *AlterTopic) Position() lexer.Position          { return s.Pos }
func (s *ShowTopics) Position() lexer.Position          { return s.Pos }
func (s *DescribeTopic) Position() lexer.Position       { return s.Pos }
func (s *ShowOffsets) Position() lexer.Position         { return s.Pos }
func (s *Produce) Position() lexer.Position             { return s.Pos }
func (s *Select) Position() lexer.Position              { return s.Pos }
func (s *Fetch) Position() lexer.Position               { return s.Pos }
func (s *Subscribe) Position() lexer.Position           { return s.Pos }
func (s *Assert) Position() lexer.Position              { return s.Pos }
func (s *ShowGroups) Position() lexer.Position          { return s.Pos }
func (s *DescribeGroup) Position() lexer.Position       { return s.Pos }
func (s *JoinGroup) Position() lexer.Position           { return s.Pos }
func (s *LeaveGroup) Position() lexer.Position          { return s.Pos }
func (s *CommitOffset) Position() lexer.Position        { return s.Pos }
func (s *ResetGroup) Position() lexer.Position          { return s.Pos }
func (s *DropGroup) Position() lexer.Position           { return s.Pos }
func (s *BeginTxn) Position() lexer.Position            { return s.Pos }
func (s *CommitTxn) Position() lexer.Position           { return s.Pos }
func (s *AbortTxn) Position() lexer.Position            { return s.Pos }
func (s *CreateUser) Position() lexer.Position          { return s.Pos }
func (s *DropUser) Position() lexer.Position            { return s.Pos }
func (s *ShowUsers) Position() lexer.Position           { return s.Pos }
func (s *Grant) Position() lexer.Position               { return s.Pos }
func (s *Revoke) Position() lexer.Position              { return s.Pos }
func (s *ShowAcls) Position() lexer.Position            { return s.Pos }
func (s *ShowBrokers) Position() lexer.Position         { return s.Pos }
func (s *ShowCluster) Position() lexer.Position         { return s.Pos }
func (s *MovePartition) Position() lexer.Position       { return s.Pos }
func (s *ShowReassignments) Position() lexer.Position   { return s.Pos }

func (*Connect) stmt()             {}
func (*Disconnect) stmt()          {}
func (*UseGroup) stmt()            {}
func (*SetFormat) stmt()           {}
func (*SetIsolation) stmt()        {}
func (*ShowTransactions) stmt()    {}
func (*DescribeTransaction) stmt() {}
func (*Help) stmt()                {}
func (*Exit) stmt()                {}
func (*CreateTopic) stmt()         {}
func (*DropTopic) stmt()           {}
func (*AlterTopic) stmt()          {}
func (*ShowTopics) stmt()          {}
func (*DescribeTopic) stmt()       {}
func (*ShowOffsets) stmt()         {}
func (*Produce) stmt()             {}
func (*Select) stmt()              {}
func (*Fetch) stmt()               {}
func (*Subscribe) stmt()           {}
func (*Assert) stmt()              {}
func (*ShowGroups) stmt()          {}
func (*DescribeGroup) stmt()       {}
func (*JoinGroup) stmt()           {}
func (*LeaveGroup) stmt()          {}
func (*CommitOffset) stmt()        {}
func (*ResetGroup) stmt()          {}
func (*DropGroup) stmt()           {}
func (*BeginTxn) stmt()            {}
func (*CommitTxn) stmt()           {}
func (*AbortTxn) stmt()            {}
func (*CreateUser) stmt()          {}
func (*DropUser) stmt()            {}
func (*ShowUsers) stmt()           {}
func (*Grant) stmt()               {}
func (*Revoke) stmt()              {}
func (*ShowAcls) stmt()            {}
func (*ShowBrokers) stmt()         {}
func (*ShowCluster) stmt()         {}
func (*MovePartition) stmt()       {}
func (*ShowReassignments) stmt()   {}
