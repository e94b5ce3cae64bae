//go:build !linux

package log

import "os"

// datasync makes f's data durable; without fdatasync, a full fsync.
func datasync(f *os.File) error { return f.Sync() }
