package replica

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/moonmq/moonmq/engine/vfs"
)

// ErrDataDirLocked is returned when another process holds the data directory.
var ErrDataDirLocked = errors.New("data directory is in use by another moonmq process")

// lockDataDir takes an exclusive advisory lock on <dir>/.lock, so two
// brokers can never append to the same partition files. The kernel drops
// the lock when the process dies, so a crash never leaves it stale. Only the
// real filesystem is locked: an in-memory one belongs to one process.
func lockDataDir(fsys vfs.FS, dir string) (io.Closer, error) {
	if fsys != vfs.OS {
		return nil, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrDataDirLocked, dir)
		}
		return nil, fmt.Errorf("broker: lock %s: %w", dir, err)
	}
	return f, nil
}

// fdLimit is the process's soft limit on open files.
func fdLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 1 << 30
	}
	return int(r.Cur)
}
