package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory FS that remembers what was made durable, so a test
// can ask what a crash at this moment would leave behind (Crash).
//
// Its model is strict POSIX, as on Linux with ext4 or xfs: file contents
// and sizes are durable only after SyncData; a created, renamed or removed
// name is durable only after SyncDir of its directory (fsyncing a new file
// does not make its name durable). After a crash, a directory's entries are
// those of its last SyncDir followed by some prefix of the later changes
// (metadata is journaled in order); a file's contents are those of its last
// SyncData followed by any subset of the later writes and truncations, each
// possibly torn (writeback is not ordered). Open handles keep working on
// removed files, as on Unix.
//
// Paths are slash-separated and relative to the MemFS root; a leading "/"
// is ignored. A MemFS is safe for concurrent use (one mutex).
type MemFS struct {
	mu   sync.Mutex
	root *memNode
	now  func() time.Time
}

type memNode struct {
	isDir bool

	// Directory state.
	children map[string]*memNode // current entries
	synced   map[string]*memNode // entries as of the last SyncDir
	dirOps   []dirOp             // entry changes since then, in order

	// File state.
	data       []byte
	syncedData []byte
	dataOps    []dataOp // writes and truncations since the last SyncData

	modTime time.Time
}

// dirOp sets name to node (nil: removes it).
type dirOp struct {
	name string
	node *memNode
}

// dataOp is one unsynced write (data at off) or truncation (to size).
type dataOp struct {
	truncate bool
	off      int64
	data     []byte
	size     int64
}

// NewMem returns an empty MemFS.
func NewMem() *MemFS {
	return &MemFS{root: newDir(time.Now()), now: time.Now}
}

func newDir(now time.Time) *memNode {
	return &memNode{isDir: true, children: map[string]*memNode{}, synced: map[string]*memNode{}, modTime: now}
}

// split cleans a path into its elements; the root has none.
func split(name string) []string {
	name = filepath.ToSlash(filepath.Clean("/" + name))
	if name == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(name, "/"), "/")
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// lookupDir returns the directory holding the last element of name, and
// that element. Caller holds mu.
func (m *MemFS) lookupDir(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", pathErr(op, name, fs.ErrInvalid)
	}
	dir := m.root
	for _, p := range parts[:len(parts)-1] {
		n, ok := dir.children[p]
		if !ok {
			return nil, "", pathErr(op, name, fs.ErrNotExist)
		}
		if !n.isDir {
			return nil, "", pathErr(op, name, errNotDir)
		}
		dir = n
	}
	return dir, parts[len(parts)-1], nil
}

var (
	errNotDir   = errors.New("not a directory")
	errIsDir    = errors.New("is a directory")
	errNotEmpty = errors.New("directory not empty")
	errClosed   = os.ErrClosed
)

// lookup returns the node at name. Caller holds mu.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	if len(split(name)) == 0 {
		return m.root, nil
	}
	dir, base, err := m.lookupDir(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	if !ok {
		return nil, pathErr(op, name, fs.ErrNotExist)
	}
	return n, nil
}

func (d *memNode) setEntry(name string, n *memNode) {
	if n == nil {
		delete(d.children, name)
	} else {
		d.children[name] = n
	}
	d.dirOps = append(d.dirOps, dirOp{name: name, node: n})
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupDir("open", name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	switch {
	case ok && n.isDir:
		return nil, pathErr("open", name, errIsDir)
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case !ok:
		n = &memNode{modTime: m.now()}
		dir.setEntry(base, n)
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if ok && flag&os.O_TRUNC != 0 && writable {
		n.truncate(0, m.now())
	}
	return &memFile{m: m, n: n, name: name, writable: writable}, nil
}

func (n *memNode) truncate(size int64, now time.Time) {
	if size <= int64(len(n.data)) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	n.dataOps = append(n.dataOps, dataOp{truncate: true, size: size})
	n.modTime = now
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupDir("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.isDir && len(n.children) > 0 {
		return pathErr("remove", name, errNotEmpty)
	}
	dir.setEntry(base, nil)
	return nil
}

// RemoveAll implements FS.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(split(name)) == 0 {
		return pathErr("removeall", name, fs.ErrInvalid)
	}
	dir, base, err := m.lookupDir("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := dir.children[base]; ok {
		dir.setEntry(base, nil)
	}
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.lookupDir("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := od.children[ob]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	nd, nb, err := m.lookupDir("rename", newname)
	if err != nil {
		return err
	}
	if t, ok := nd.children[nb]; ok && t.isDir != n.isDir {
		return pathErr("rename", newname, errIsDir)
	}
	if od == nd && ob == nb {
		return nil
	}
	nd.setEntry(nb, n)
	od.setEntry(ob, nil)
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(name string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir := m.root
	for _, p := range split(name) {
		n, ok := dir.children[p]
		if !ok {
			n = newDir(m.now())
			dir.setEntry(p, n)
		} else if !n.isDir {
			return pathErr("mkdir", name, errNotDir)
		}
		dir = n
	}
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(name string) ([]DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, pathErr("readdir", name, errNotDir)
	}
	out := make([]DirEntry, 0, len(n.children))
	for k, c := range n.children {
		out = append(out, DirEntry{Name: k, IsDir: c.isDir})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Size: int64(len(n.data)), ModTime: n.modTime, IsDir: n.isDir}, nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("syncdir", name)
	if err != nil {
		return err
	}
	if !n.isDir {
		return pathErr("syncdir", name, errNotDir)
	}
	n.synced = make(map[string]*memNode, len(n.children))
	for k, c := range n.children {
		n.synced[k] = c
	}
	n.dirOps = nil
	return nil
}

// CrashOptions choose what a crash keeps of the work that was not durable.
type CrashOptions struct {
	// Rand, when nil, makes the crash lose everything not synced: the
	// harshest outcome. When set, each directory keeps a random prefix of
	// its unsynced entry changes and each file a random subset of its
	// unsynced writes and truncations, some of them torn.
	Rand *rand.Rand
	// ProcessOnly is a process killed on a machine that stays up: the page
	// cache survives, so everything written is kept, synced or not. (Rand
	// is ignored.)
	ProcessOnly bool
}

// Crash returns the filesystem a crash at this moment could leave behind,
// as a new MemFS; m itself is not changed (its open files keep working, but
// belong to the old world).
func (m *MemFS) Crash(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	clones := map[*memNode]*memNode{}
	return &MemFS{root: m.root.crashClone(opts, clones), now: m.now}
}

func (n *memNode) crashClone(opts CrashOptions, clones map[*memNode]*memNode) *memNode {
	rng := opts.Rand
	if c, ok := clones[n]; ok {
		return c
	}
	c := &memNode{isDir: n.isDir, modTime: n.modTime}
	clones[n] = c
	if n.isDir {
		entries := make(map[string]*memNode, len(n.synced))
		for k, v := range n.synced {
			entries[k] = v
		}
		keep := 0
		switch {
		case opts.ProcessOnly:
			keep = len(n.dirOps)
		case rng != nil:
			keep = rng.IntN(len(n.dirOps) + 1)
		}
		for _, op := range n.dirOps[:keep] {
			if op.node == nil {
				delete(entries, op.name)
			} else {
				entries[op.name] = op.node
			}
		}
		c.children = make(map[string]*memNode, len(entries))
		for k, v := range entries {
			c.children[k] = v.crashClone(opts, clones)
		}
		c.synced = make(map[string]*memNode, len(c.children))
		for k, v := range c.children {
			c.synced[k] = v
		}
		return c
	}
	data := append([]byte(nil), n.syncedData...)
	if opts.ProcessOnly {
		data = append(data[:0], n.data...)
	} else if rng != nil {
		for _, op := range n.dataOps {
			if rng.IntN(2) == 0 {
				continue // this change never reached the disk
			}
			if op.truncate {
				if op.size <= int64(len(data)) {
					data = data[:op.size]
				} else {
					data = append(data, make([]byte, op.size-int64(len(data)))...)
				}
				continue
			}
			b := op.data
			if rng.IntN(4) == 0 {
				b = b[:rng.IntN(len(b)+1)] // torn: only a prefix landed
			}
			data = writeAt(data, b, op.off)
		}
	}
	c.data = data
	c.syncedData = append([]byte(nil), data...)
	return c
}

func writeAt(data, b []byte, off int64) []byte {
	if end := off + int64(len(b)); end > int64(len(data)) {
		data = append(data, make([]byte, end-int64(len(data)))...)
	}
	copy(data[off:], b)
	return data
}

// memFile is an open MemFS file.
type memFile struct {
	m        *MemFS
	n        *memNode
	name     string
	writable bool
	closed   bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return 0, pathErr("read", f.name, errClosed)
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	switch {
	case f.closed:
		return 0, pathErr("write", f.name, errClosed)
	case !f.writable:
		return 0, pathErr("write", f.name, os.ErrPermission)
	case off < 0:
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	f.n.data = writeAt(f.n.data, p, off)
	f.n.dataOps = append(f.n.dataOps, dataOp{off: off, data: append([]byte(nil), p...)})
	f.n.modTime = f.m.now()
	return len(p), nil
}

func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return 0, pathErr("stat", f.name, errClosed)
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	switch {
	case f.closed:
		return pathErr("truncate", f.name, errClosed)
	case !f.writable:
		return pathErr("truncate", f.name, os.ErrPermission)
	case size < 0:
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	f.n.truncate(size, f.m.now())
	return nil
}

func (f *memFile) SyncData() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.name, errClosed)
	}
	f.n.syncedData = append(f.n.syncedData[:0], f.n.data...)
	f.n.dataOps = nil
	return nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, errClosed)
	}
	f.closed = true
	return nil
}
