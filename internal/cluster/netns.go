package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The namespace network (Options.Network = Namespaces): every node runs in
// its own Linux network namespace, joined to the test's host namespace by a
// veth pair on one bridge, with an address of its own on a /24 chosen for
// the cluster. The host (the test's clients, kcat) reaches every node over
// the bridge; nodes reach each other directly, on the ports the flag
// contract defaults to. Cutting node i off from node j adds a blackhole
// route to j's address in i's namespace and one to i's in j's: every
// protocol between them stops — raft, the controller RPC, follower fetches
// either way, and gossip over UDP and TCP — while the host still reaches
// both. (A blackhole route fails a local sender's new connections and
// datagrams at once, with EINVAL, and stalls its established connections:
// their segments go nowhere until they time out.)
//
// It needs root and iproute2. Names carry the test process's pid
// ("mq<pid>x<k>..."), so a later run deletes what a killed run left.

// Network chooses how a cluster's nodes are connected and cut.
type Network int

const (
	// Proxies: every node on 127.0.0.1, links through fault proxies (the
	// package comment); cannot cut gossip.
	Proxies Network = iota
	// Namespaces: a network namespace per node (needs root); cuts every
	// link.
	Namespaces
)

// NamespacesAvailable says why the Namespaces network cannot be used here,
// or nil: it needs root and `ip` (iproute2) able to create a namespace.
func NamespacesAvailable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("network namespaces need iproute2's ip: %w", err)
	}
	name := fmt.Sprintf("mq%dprobe", os.Getpid())
	if err := ipCmd("netns", "add", name); err != nil {
		return err
	}
	return ipCmd("netns", "del", name)
}

var netnsSeq atomic.Int32

// netns is one cluster's namespaces, veths and bridge.
type netns struct {
	tag    string // mq<pid>x<k>
	bridge string
	prefix string // "10.A.B." of the cluster's /24
	spaces []string
	// cut[i][j]: node i's namespace has a blackhole route to node j.
	cut [][]bool
}

// hostIP is the bridge's address: where the nodes see the test's clients.
func (n *netns) hostIP() string { return n.prefix + "1" }

// nodeIP is node index i's address.
func (n *netns) nodeIP(i int) string { return n.prefix + strconv.Itoa(10+i) }

// setupNetns creates the bridge and one namespace per node.
func setupNetns(nodes int) (*netns, error) {
	sweepNetns()
	tag := fmt.Sprintf("mq%dx%d", os.Getpid(), netnsSeq.Add(1))
	prefix, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	n := &netns{tag: tag, bridge: tag + "b", prefix: prefix}
	steps := [][]string{
		{"link", "add", n.bridge, "type", "bridge"},
		{"addr", "add", n.hostIP() + "/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	for i := 0; i < nodes; i++ {
		ns, veth := fmt.Sprintf("%sn%d", tag, i), fmt.Sprintf("%sv%d", tag, i)
		n.spaces = append(n.spaces, ns)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"link", "set", veth, "master", n.bridge, "up"},
			[]string{"-n", ns, "addr", "add", n.nodeIP(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			n.close()
			return nil, err
		}
	}
	n.cut = make([][]bool, nodes)
	for i := range n.cut {
		n.cut[i] = make([]bool, nodes)
	}
	return n, nil
}

// exec is the command prefix that runs a process in node i's namespace
// (ip execs it in place: same pid).
func (n *netns) exec(i int) []string { return []string{"ip", "netns", "exec", n.spaces[i]} }

// setCut adds or removes the blackhole routes between nodes i and j.
func (n *netns) setCut(i, j int, cut bool) error {
	for _, d := range [][2]int{{i, j}, {j, i}} {
		from, to := d[0], d[1]
		if n.cut[from][to] == cut {
			continue
		}
		op := "add"
		if !cut {
			op = "del"
		}
		if err := ipCmd("-n", n.spaces[from], "route", op, "blackhole", n.nodeIP(to)+"/32"); err != nil {
			return err
		}
		n.cut[from][to] = cut
	}
	return nil
}

// close deletes the namespaces (their veths go with them) and the bridge.
func (n *netns) close() {
	for _, ns := range n.spaces {
		_ = ipCmd("netns", "del", ns)
	}
	_ = ipCmd("link", "del", n.bridge)
}

// freeSubnet picks a 10.A.B.0/24 in 10.200.0.0/13 that no interface of the
// host uses.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip addr show: %v: %s", err, out)
	}
	for range 100 {
		p := fmt.Sprintf("10.%d.%d.", 200+rand.IntN(8), rand.IntN(256))
		if !strings.Contains(string(out), " "+p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("no free /24 in 10.200.0.0/13")
}

var staleName = regexp.MustCompile(`^mq(\d+)x\d+[nb]\d*$`)

// sweepNetns deletes namespaces and bridges left by test processes that
// died without their cleanup (a SIGKILLed `go test`).
func sweepNetns() {
	dead := func(name string) bool {
		m := staleName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, _ := strconv.Atoi(m[1])
		return pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && dead(f[0]) {
				_ = ipCmd("netns", "del", f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				if name := strings.TrimSuffix(f[1], ":"); dead(name) {
					_ = ipCmd("link", "del", name)
				}
			}
		}
	}
}

// ipCmd runs ip with args, within 10 s.
func ipCmd(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
