package log

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/moonmq/moonmq/engine/vfs"
)

// DefaultFileCacheCapacity is the capacity of a FileCache made for a Log
// whose Options name none.
const DefaultFileCacheCapacity = 64

// FileCache bounds the file descriptors that segment files hold, across
// every Log that shares it (a broker makes one). A sealed segment's .log,
// .index and .timeindex are opened when a read needs them and closed again
// once they are the least recently used of more than Capacity idle files,
// as pebble's table cache does for sstables; so a node with many partitions
// or many small segments holds a bounded number of descriptors whatever its
// data looks like. Only the active segment's .log of each open log is
// pinned (it is written continuously); pinned files do not count against
// the capacity.
//
// Handles are reference counted: a file in use is never closed under its
// reader. Forget drops a path whose file was removed or replaced, so the
// next acquire opens the new file; the old descriptor closes when its last
// user releases it.
type FileCache struct {
	capacity int

	mu      sync.Mutex
	entries map[cacheKey]*cachedFile
	idle    list.List // *cachedFile with no references, most recently used first
	open    int       // descriptors held, idle or not
	pinned  int
	opens   uint64
	evicted uint64
	toClose []vfs.File // closed by unlockAndClose, after c.mu
}

type cacheKey struct {
	fs   vfs.FS
	path string
}

// cachedFile is one open file in the cache.
type cachedFile struct {
	key    cacheKey
	f      vfs.File
	refs   int
	pins   int
	elem   *list.Element // in idle while refs == 0
	gone   bool          // forgotten: closed at the last release, never handed out again
	closed bool
}

// NewFileCache returns a cache keeping at most capacity idle files open.
func NewFileCache(capacity int) *FileCache {
	return &FileCache{capacity: max(capacity, 1), entries: map[cacheKey]*cachedFile{}}
}

// FileCacheStats describe a cache, for metrics.
type FileCacheStats struct {
	Capacity int    // idle files kept open at most
	Open     int    // descriptors held now (pinned and in use included)
	Pinned   int    // active segments' files
	Opens    uint64 // files opened so far
	Evicted  uint64 // idle files closed to stay within the capacity
}

// Stats returns the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return FileCacheStats{Capacity: c.capacity, Open: c.open, Pinned: c.pinned, Opens: c.opens, Evicted: c.evicted}
}

// acquire returns the open file at path, opening it with flag if it is not
// open yet (flag should not create files: a reader must never recreate a
// file that retention just removed). The caller releases it.
func (c *FileCache) acquire(fs vfs.FS, path string, flag int) (*cachedFile, error) {
	key := cacheKey{fs, path}
	c.mu.Lock()
	defer c.unlockAndClose()
	if cf, ok := c.entries[key]; ok {
		if cf.elem != nil {
			c.idle.Remove(cf.elem)
			cf.elem = nil
		}
		cf.refs++
		return cf, nil
	}
	// Make room before the open, which needs the descriptor: what this
	// evicts is idle files (never a removed one, whose last close can be
	// slow), so they are closed now rather than after the lock.
	c.evictLocked(c.capacity - 1)
	c.closeQueuedLocked()
	f, err := fs.OpenFile(path, flag, 0o644)
	if err != nil && vfs.IsTooManyFiles(err) && c.idle.Len() > 0 {
		// Out of descriptors: give back every idle one and try once more.
		c.evictLocked(0)
		c.closeQueuedLocked()
		f, err = fs.OpenFile(path, flag, 0o644)
	}
	if err != nil {
		return nil, err
	}
	cf := &cachedFile{key: key, f: f, refs: 1}
	c.entries[key] = cf
	c.open++
	c.opens++
	return cf, nil
}

// pin keeps cf open and out of the idle list until unpin, on top of the
// caller's reference (the active segment's .log, written continuously).
// Pinned files do not count against the capacity.
func (c *FileCache) pin(cf *cachedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cf.pins++
	c.pinned++
}

// unpin ends a pin (the segment was sealed or dropped).
func (c *FileCache) unpin(cf *cachedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cf.pins > 0 {
		cf.pins--
		c.pinned--
	}
}

// release drops a reference taken by acquire or adopt.
func (c *FileCache) release(cf *cachedFile) {
	c.mu.Lock()
	defer c.unlockAndClose()
	cf.refs--
	if cf.refs > 0 {
		return
	}
	if cf.gone {
		c.closeLocked(cf)
		return
	}
	cf.elem = c.idle.PushFront(cf)
	c.evictLocked(c.capacity)
}

// forget drops path from the cache: the file was removed or is about to be
// replaced. A handle in use stays valid until released.
func (c *FileCache) forget(fs vfs.FS, path string) {
	c.mu.Lock()
	defer c.unlockAndClose()
	if cf, ok := c.entries[cacheKey{fs, path}]; ok {
		c.forgetLocked(cf)
	}
}

func (c *FileCache) forgetLocked(cf *cachedFile) {
	delete(c.entries, cf.key)
	cf.gone = true
	if cf.refs == 0 {
		c.closeLocked(cf)
	}
}

// evictLocked closes least recently used idle files until at most keep are
// idle.
func (c *FileCache) evictLocked(keep int) {
	for c.idle.Len() > max(keep, 0) {
		cf := c.idle.Remove(c.idle.Back()).(*cachedFile)
		cf.elem = nil
		delete(c.entries, cf.key)
		c.closeLocked(cf)
		c.evicted++
	}
}

func (c *FileCache) closeLocked(cf *cachedFile) {
	if cf.closed {
		return
	}
	if cf.elem != nil {
		c.idle.Remove(cf.elem)
		cf.elem = nil
	}
	cf.closed = true
	c.open--
	c.toClose = append(c.toClose, cf.f)
}

// closeQueuedLocked closes what closeLocked set aside, under c.mu.
func (c *FileCache) closeQueuedLocked() {
	for _, f := range c.toClose {
		_ = f.Close()
	}
	c.toClose = nil
}

// unlockAndClose releases c.mu and then closes the files closeLocked set
// aside: closing the last descriptor of a removed file frees its extents,
// which can take long, and must not hold up every other log's reads.
func (c *FileCache) unlockAndClose() {
	files := c.toClose
	c.toClose = nil
	c.mu.Unlock()
	for _, f := range files {
		_ = f.Close()
	}
}

// fileRef names one segment file: where it is and which cache opens it.
type fileRef struct {
	fs    vfs.FS
	cache *FileCache
	path  string
}

// open acquires the file for reading (and writing, for the active
// segment's indexes). The caller calls release on the result.
func (r fileRef) open() (*cachedFile, error) {
	cf, err := r.cache.acquire(r.fs, r.path, os.O_RDWR)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s was removed", errFileGone, r.path)
		}
		return nil, fmt.Errorf("open %s: %w", r.path, err)
	}
	return cf, nil
}

func (r fileRef) release(cf *cachedFile) { r.cache.release(cf) }

func (r fileRef) forget() { r.cache.forget(r.fs, r.path) }

// errFileGone: a segment file was removed (by retention or truncation)
// between taking the segment and opening its file. Reads turn it into
// ErrOffsetOutOfRange, as if retention had run just before them.
var errFileGone = errors.New("log: segment file removed")
