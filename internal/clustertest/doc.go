// Package clustertest holds the cluster tests of issue 13: real three-node
// clusters of `moonmq serve` processes on 127.0.0.1 (internal/cluster),
// driven by franz-go and kcat, with faults injected (SIGKILL, SIGSTOP,
// SIGTERM, isolation through internal/faultproxy) and every client's
// history checked at the end (internal/history). The package has no code
// outside its tests.
//
// The tests skip while the binary does not run a cluster (lacks --peers or
// refuses it: cluster.SkipUnlessSupported). MOONMQ_SOAK sets how long the fault test
// runs: a duration ("10m") or a number of nemesis cycles ("200"); without
// it, about a minute (make test). MOONMQ_SOAK_SEED replays the random order
// of the faults a run logged. MOONMQ_CLUSTER_LOGS=1 prints every
// node's log at the end of a test that passed too (a failed one always
// does).
package clustertest
