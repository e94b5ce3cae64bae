package mql

import (
	"fmt"
	"strings"

	"github.com/moonmq/moonmq/internal/cli"
)

// HelpEntry documents one statement.
type HelpEntry struct {
	// Name is the statement's leading keywords, e.g. "CREATE TOPIC".
	Name    string
	Syntax  string
	Summary string
	Example string
}

// HelpEntries is the HELP text of every statement, in the order HELP lists
// them. The tests check that every example parses and that every statement
// type has an entry.
var HelpEntries = []HelpEntry{
	{"CONNECT", "CONNECT 'host:port' [USER 'u' PASSWORD 'p'] [MECHANISM 'SCRAM-SHA-256' | 'SCRAM-SHA-512' | 'PLAIN' | 'SCRAM-SHA-256-PLUS' | 'SCRAM-SHA-512-PLUS'] [TLS [CA 'file']]",
		"connect to another cluster, with SASL (SCRAM-SHA-256 by default) and TLS\n" +
			"  Without USER, MECHANISM or TLS the command line's settings (--user, --tls, --client-config, ...) are kept; with any of them, only the statement's apply.\n" +
			"  Over TLS, SCRAM uses channel binding (-PLUS) when the broker offers it.",
		"CONNECT 'localhost:9093' USER 'alice' PASSWORD 'secret' TLS CA 'ca.pem';"},
	{"DISCONNECT", "DISCONNECT", "close the connection", "DISCONNECT;"},
	{"USE GROUP", "USE GROUP name", "set the default group of FETCH, COMMIT and SUBSCRIBE", "USE GROUP billing;"},
	{"SET FORMAT", "SET FORMAT table | json | csv", "choose the output format (json: one object per row; in json and csv, OK messages go to stderr)", "SET FORMAT json;"},
	{"SET ISOLATION", "SET ISOLATION READ COMMITTED | READ UNCOMMITTED",
		"choose what SELECT, FETCH and SUBSCRIBE read: READ UNCOMMITTED (the default) or READ COMMITTED (no aborted or open transactions)\n" +
			"  READ UNCOMMITTED reads up to the high watermark, records of open and aborted transactions included.\n" +
			"  READ COMMITTED (Kafka's read_committed) stops at the last stable offset and leaves out aborted transactions' records.",
		"SET ISOLATION READ COMMITTED;"},
	{"HELP", "HELP [statement]", "list the statements, or show one's syntax", "HELP SELECT;"},
	{"EXIT", "EXIT | QUIT", "leave the console; in the REPL also without ';', or with \\q or Ctrl-D", "EXIT;"},

	{"CREATE TOPIC", "CREATE TOPIC [IF NOT EXISTS] name [PARTITIONS n] [REPLICAS n] [WITH (key = value, ...)]",
		"create a topic; durations and sizes may carry units for keys ending in .ms and .bytes",
		"CREATE TOPIC orders PARTITIONS 4 WITH (retention.ms = '7d', cleanup.policy = 'compact');"},
	{"DROP TOPIC", "DROP TOPIC [IF EXISTS] name", "delete a topic and its records", "DROP TOPIC IF EXISTS orders;"},
	{"ALTER TOPIC", "ALTER TOPIC name SET (key = value, ...) | RESET (key, ...) | ADD PARTITIONS n",
		"change configs, revert them to defaults, or add partitions", "ALTER TOPIC orders SET (retention.ms = '1d');"},
	{"SHOW TOPICS", "SHOW TOPICS [LIKE 'pattern']", "list topics: partitions, replicas, records, bytes (internal topics only with LIKE)", "SHOW TOPICS LIKE 'ord%';"},
	{"DESCRIBE TOPIC", "DESCRIBE TOPIC name", "partitions (leader, replicas, isr, log start, high watermark, last stable offset, size; if compacted, dirty ratio and last cleaning) and configs", "DESCRIBE TOPIC orders;"},
	{"SHOW OFFSETS", "SHOW OFFSETS topic [AT TIMESTAMP 'time']", "each partition's start and end offsets, or the first offset at or after a time",
		"SHOW OFFSETS orders AT TIMESTAMP '2026-11-30T10:00:00Z';"},

	{"PRODUCE", "PRODUCE INTO topic [PARTITION n] [KEY k] VALUE v [HEADERS (name = v, ...)] [TIMESTAMP 'time']\n  PRODUCE INTO topic [PARTITION n] VALUES (k, v), ...",
		"write one record, or a batch; keys and values are strings, numbers or NULL", "PRODUCE INTO orders KEY 'k1' VALUE 'hello world' HEADERS ('trace-id' = 'abc123');"},
	{"SELECT", "SELECT * | count(*) | column, ... FROM topic [PARTITION n] [WHERE condition] [FROM EARLIEST | LATEST | OFFSET n | TIMESTAMP 'time'] [LIMIT n]\n" +
		"    [ISOLATION READ COMMITTED | READ UNCOMMITTED]",
		"read a bounded range (stops at the end of the log). Columns: partition, offset, timestamp, key, value, headers, header('name').\n" +
			"  WHERE: key, value, header('name') with = != < > LIKE IS [NOT] NULL; offset, partition, timestamp with = != < <= > >=; AND OR NOT ( ).\n" +
			"  FROM LATEST LIMIT n reads the newest n records of each partition.\n" +
			"  ISOLATION overrides SET ISOLATION for this query: READ COMMITTED leaves out aborted and open transactions' records.\n" +
			"  A 'time' is RFC 3339 ('2026-11-30T10:00:00Z'), a date ('2026-11-30'), a duration ago ('5m', '1h30m', '2d') or '@unix-millis'.",
		"SELECT offset, key, value FROM orders WHERE key = 'k1' AND offset >= 10 LIMIT 20;"},
	{"FETCH", "FETCH FROM topic [GROUP name] [LIMIT n]",
		"read from the group's committed position (the start of the log without one) and commit past what was returned", "FETCH FROM orders GROUP billing LIMIT 10;"},
	{"SUBSCRIBE", "SUBSCRIBE [TO] topic [GROUP name] [WHERE condition] [FROM position] [TIMEOUT seconds | 500ms] [LIMIT n]",
		"stream records as they arrive (from LATEST by default) until TIMEOUT, LIMIT or Ctrl-C; with a group, commits what it showed",
		"SUBSCRIBE TO orders TIMEOUT 5 LIMIT 10;"},
	{"ASSERT", "ASSERT (SELECT ...) op value", "fail the script (exit 1, FILE:LINE:COL) unless the query's single value compares true",
		"ASSERT (SELECT count(*) FROM orders WHERE key = 'k1') = 1;"},

	{"SHOW GROUPS", "SHOW GROUPS [LIKE 'pattern']", "list groups: state, protocol, members, total lag", "SHOW GROUPS;"},
	{"DESCRIBE GROUP", "DESCRIBE GROUP name", "members and assignments; per partition committed offset, end and lag", "DESCRIBE GROUP billing;"},
	{"JOIN GROUP", "JOIN GROUP name ON topic, ...", "make this session a member of a group (FETCH then reads its assigned partitions)", "JOIN GROUP billing ON orders, payments;"},
	{"LEAVE GROUP", "LEAVE GROUP [name]", "end the session's group membership", "LEAVE GROUP;"},
	{"COMMIT", "COMMIT topic PARTITION n OFFSET n [GROUP name]", "set a group's committed offset (the next offset it reads)", "COMMIT orders PARTITION 2 OFFSET 1 GROUP billing;"},
	{"RESET GROUP", "RESET GROUP name [TOPIC topic] TO EARLIEST | LATEST | OFFSET n | TIMESTAMP 'time'",
		"move a group's committed offsets (the group must have no live members)", "RESET GROUP billing TOPIC orders TO EARLIEST;"},
	{"DROP GROUP", "DROP GROUP [IF EXISTS] name", "delete a group and its committed offsets", "DROP GROUP billing;"},

	{"BEGIN TRANSACTION", "BEGIN TRANSACTION ['id']", "start a transaction; PRODUCE joins it until COMMIT or ABORT TRANSACTION", "BEGIN TRANSACTION 'tx-1';"},
	{"COMMIT TRANSACTION", "COMMIT TRANSACTION", "commit the open transaction", "COMMIT TRANSACTION;"},
	{"ABORT TRANSACTION", "ABORT TRANSACTION", "abort the open transaction", "ABORT TRANSACTION;"},
	{"SHOW TRANSACTIONS", "SHOW TRANSACTIONS [LIKE 'pattern']", "list transactional ids on every broker: state, producer id, coordinator",
		"SHOW TRANSACTIONS LIKE 'tx-%';"},
	{"DESCRIBE TRANSACTION", "DESCRIBE TRANSACTION id", "a transactional id's state, producer id and epoch, timeout, start time, and the partitions its transaction wrote to",
		"DESCRIBE TRANSACTION 'tx-1';"},

	{"CREATE USER", "CREATE USER name PASSWORD 'secret' [MECHANISM 'SCRAM-SHA-256' | 'SCRAM-SHA-512']", "create or update a SCRAM user", "CREATE USER alice PASSWORD 'secret';"},
	{"DROP USER", "DROP USER name [MECHANISM 'SCRAM-SHA-256']", "delete a SCRAM user's credentials", "DROP USER alice;"},
	{"SHOW USERS", "SHOW USERS", "list SCRAM users", "SHOW USERS;"},
	{"GRANT", "GRANT op, ... ON TOPIC name [PREFIXED] | GROUP name [PREFIXED] | CLUSTER TO principal",
		"allow operations (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ALL, ...)", "GRANT READ, WRITE ON TOPIC 'orders' PREFIXED TO alice;"},
	{"REVOKE", "REVOKE op, ... ON resource FROM principal", "remove allow ACLs", "REVOKE WRITE ON TOPIC orders FROM alice;"},
	{"SHOW ACLS", "SHOW ACLS [FOR principal]", "list ACLs", "SHOW ACLS FOR alice;"},
	{"SET QUOTA", "SET QUOTA (key = value, ...) FOR USER name|DEFAULT [CLIENT id|DEFAULT] | CLIENT id|DEFAULT | IP address|DEFAULT",
		"set client quotas of a user, client id or ip (the broker slows a client down to them)\n" +
			"  Keys: producer_byte_rate, consumer_byte_rate (bytes/s per broker; units like 1MiB), request_percentage,\n" +
			"  controller_mutation_rate, connection_creation_rate (ip only). DEFAULT is the default user, client id or ip.",
		"SET QUOTA (producer_byte_rate = 1MiB, consumer_byte_rate = 2MiB) FOR USER alice;"},
	{"RESET QUOTA", "RESET QUOTA (key, ...) FOR target", "remove client quotas (the entity falls back to the defaults)", "RESET QUOTA (producer_byte_rate) FOR USER alice;"},
	{"SHOW QUOTAS", "SHOW QUOTAS [FOR target]", "list client quotas: user, client id, ip, quota, value", "SHOW QUOTAS FOR USER alice;"},

	{"SHOW BROKERS", "SHOW BROKERS", "list brokers: address, rack, controller, up or down, partitions led and hosted", "SHOW BROKERS;"},
	{"SHOW CLUSTER", "SHOW CLUSTER", "cluster id, controller, brokers up and down, under-replicated and offline partitions", "SHOW CLUSTER;"},
	{"MOVE PARTITION", "MOVE PARTITION topic n TO BROKERS (id, ...)", "reassign a partition's replicas", "MOVE PARTITION orders 2 TO BROKERS (2, 3);"},
	{"SHOW REASSIGNMENTS", "SHOW REASSIGNMENTS", "list partition reassignments in progress", "SHOW REASSIGNMENTS;"},
}

func (s *Session) help(words []string) {
	var b strings.Builder
	if len(words) == 0 {
		b.WriteString("MQL statements (end each with ';'; keywords are case-insensitive; HELP <statement> for details):\n")
		w := 0
		for _, e := range HelpEntries {
			w = max(w, len(e.Name))
		}
		for _, e := range HelpEntries {
			fmt.Fprintf(&b, "  %-*s  %s\n", w, e.Name, strings.SplitN(e.Summary, "\n", 2)[0])
		}
		b.WriteString("Names are bare (orders, my-topic, retention.ms) or quoted ('select'); strings are '...' or \"...\"; -- starts a comment.\n")
		fmt.Fprint(s.opts.Out, b.String())
		return
	}
	matches := FindHelp(words)
	if len(matches) == 0 {
		msg := fmt.Sprintf("no help for %s", strings.Join(words, " "))
		names := make([]string, 0, len(HelpEntries))
		for _, e := range HelpEntries {
			names = append(names, strings.SplitN(e.Name, " ", 2)[0])
		}
		if sug := cli.Suggest(words[0], names); sug != "" {
			msg += "; did you mean HELP " + sug + "?"
		} else {
			msg += "; HELP lists the statements"
		}
		fmt.Fprintln(s.opts.Out, msg)
		return
	}
	for i, e := range matches {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s — %s\n  %s;\nExample:\n  %s\n", e.Name, e.Summary, e.Syntax, e.Example)
	}
	fmt.Fprint(s.opts.Out, b.String())
}

// FindHelp returns the entries whose name starts with words (HELP CREATE
// shows CREATE TOPIC and CREATE USER); an exact name wins.
func FindHelp(words []string) []HelpEntry {
	want := strings.ToUpper(strings.Join(words, " "))
	var out []HelpEntry
	for _, e := range HelpEntries {
		if e.Name == want {
			return []HelpEntry{e}
		}
		if strings.HasPrefix(e.Name+" ", want+" ") {
			out = append(out, e)
		}
	}
	if want == "QUIT" {
		return FindHelp([]string{"EXIT"})
	}
	return out
}
