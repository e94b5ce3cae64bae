package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrDataDirLocked is returned when another process holds the data directory.
var ErrDataDirLocked = errors.New("data directory is in use by another moonmq process")

// lockDataDir takes an exclusive advisory lock on <dir>/.lock, so two
// brokers can never append to the same partition files. The kernel drops
// the lock when the process dies, so a crash never leaves it stale.
func lockDataDir(dir string) (*os.File, error) {
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
