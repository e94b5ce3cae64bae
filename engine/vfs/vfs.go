// Package vfs is the filesystem seam of MoonMQ's storage. engine/log (and
// the broker's partition files) do all file I/O through an FS, so that tests
// can run the real code on a MemFS that forgets what was never synced (a
// power cut), on a Faults wrapper that fails chosen operations (ENOSPC, EIO,
// EMFILE), or on both, instead of guessing which bytes a crash could lose.
//
// The interface is the small set of operations the log needs, with POSIX
// meaning: a file's data is durable once SyncData (or Sync) returns; a name
// created, renamed or removed in a directory is durable once SyncDir of that
// directory returns. OS implements it on the real filesystem; it owns no
// state and is safe for concurrent use, as are MemFS and Faults.
//
// This package imports nothing from MoonMQ.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// File is an open file. ReadAt and WriteAt may be called concurrently (at
// distinct offsets for writes); the other methods are not ordered against
// writes by the implementation.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name is the path the file was opened with (for error messages).
	Name() string
	// Size is the file's current size.
	Size() (int64, error)
	// Truncate changes the file's size; the change is durable after SyncData.
	Truncate(size int64) error
	// SyncData makes the file's data durable (fdatasync), including the
	// size needed to read it back.
	SyncData() error
}

// DirEntry is one name in a directory listing.
type DirEntry struct {
	Name  string
	IsDir bool
}

// FileInfo describes a file or directory.
type FileInfo struct {
	Size    int64
	ModTime time.Time
	IsDir   bool
}

// FS is a filesystem.
type FS interface {
	// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_RDWR,
	// O_CREATE, O_TRUNC, O_EXCL are supported).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a path and everything under it; a missing path is
	// not an error.
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(name string, perm os.FileMode) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]DirEntry, error)
	// Stat describes a path.
	Stat(name string) (FileInfo, error)
	// SyncDir makes the directory's entries (names created, renamed or
	// removed in it) durable.
	SyncDir(name string) error
}

// OS is the real filesystem.
var OS FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (f osFile) SyncData() error { return fdatasync(f.File) }

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) RemoveAll(name string) error          { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(name string, perm os.FileMode) error {
	return os.MkdirAll(name, perm)
}

func (osFS) ReadDir(name string) ([]DirEntry, error) {
	es, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(es))
	for i, e := range es {
		out[i] = DirEntry{Name: e.Name(), IsDir: e.IsDir()}
	}
	return out, nil
}

func (osFS) Stat(name string) (FileInfo, error) {
	st, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Size: st.Size(), ModTime: st.ModTime(), IsDir: st.IsDir()}, nil
}

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// IsNoSpace reports whether err is the disk being full (ENOSPC, EDQUOT).
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// IsTooManyFiles reports whether err is running out of file descriptors
// (EMFILE for the process, ENFILE for the system).
func IsTooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// ReadFile reads a whole file, refusing more than limit bytes.
func ReadFile(fs FS, name string, limit int64) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d expected", name, size, limit)
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, err
	}
	return buf, nil
}
