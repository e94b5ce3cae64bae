package vfs

import (
	"os"
	"sync/atomic"
	"syscall"
)

// Op names a filesystem operation, for fault injection.
type Op int

// The operations an Injector is asked about.
const (
	OpOpen Op = iota
	OpRead
	OpWrite
	OpTruncate
	OpSync
	OpClose
	OpRemove
	OpRename
	OpMkdir
	OpReadDir
	OpStat
	OpSyncDir
)

var opNames = [...]string{"open", "read", "write", "truncate", "sync", "close", "remove", "rename", "mkdir", "readdir", "stat", "syncdir"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Injector is asked before every operation on a path; a non-nil error fails
// the operation with it, before it touches the underlying FS.
type Injector func(op Op, path string) error

// Faults wraps an FS with fault injection and an optional limit on open
// files (past it, opens fail with EMFILE as a process out of descriptors
// would). Tests change the injector and the limit while the code under test
// runs.
type Faults struct {
	fs      FS
	inject  atomic.Pointer[Injector]
	maxOpen atomic.Int64
	open    atomic.Int64
}

// NewFaults wraps fs; with no injector and no limit it changes nothing.
func NewFaults(fs FS) *Faults { return &Faults{fs: fs} }

// SetInjector replaces the injector; nil removes it.
func (f *Faults) SetInjector(inj Injector) {
	if inj == nil {
		f.inject.Store(nil)
		return
	}
	f.inject.Store(&inj)
}

// SetMaxOpen limits the files open at once through f; 0 removes the limit.
func (f *Faults) SetMaxOpen(n int) { f.maxOpen.Store(int64(n)) }

// OpenFiles is how many files opened through f are not closed yet.
func (f *Faults) OpenFiles() int { return int(f.open.Load()) }

func (f *Faults) check(op Op, path string) error {
	if p := f.inject.Load(); p != nil {
		if err := (*p)(op, path); err != nil {
			return &os.PathError{Op: op.String(), Path: path, Err: err}
		}
	}
	return nil
}

// OpenFile implements FS.
func (f *Faults) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	if max := f.maxOpen.Load(); max > 0 && f.open.Load() >= max {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EMFILE}
	}
	file, err := f.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.open.Add(1)
	return &faultFile{File: file, f: f}, nil
}

// Remove implements FS.
func (f *Faults) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

// RemoveAll implements FS.
func (f *Faults) RemoveAll(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.fs.RemoveAll(name)
}

// Rename implements FS.
func (f *Faults) Rename(oldname, newname string) error {
	if err := f.check(OpRename, newname); err != nil {
		return err
	}
	return f.fs.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (f *Faults) MkdirAll(name string, perm os.FileMode) error {
	if err := f.check(OpMkdir, name); err != nil {
		return err
	}
	return f.fs.MkdirAll(name, perm)
}

// ReadDir implements FS.
func (f *Faults) ReadDir(name string) ([]DirEntry, error) {
	if err := f.check(OpReadDir, name); err != nil {
		return nil, err
	}
	return f.fs.ReadDir(name)
}

// Stat implements FS.
func (f *Faults) Stat(name string) (FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return FileInfo{}, err
	}
	return f.fs.Stat(name)
}

// SyncDir implements FS.
func (f *Faults) SyncDir(name string) error {
	if err := f.check(OpSyncDir, name); err != nil {
		return err
	}
	return f.fs.SyncDir(name)
}

type faultFile struct {
	File
	f      *Faults
	closed atomic.Bool
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := ff.f.check(OpRead, ff.Name()); err != nil {
		return 0, err
	}
	return ff.File.ReadAt(p, off)
}

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := ff.f.check(OpWrite, ff.Name()); err != nil {
		return 0, err
	}
	return ff.File.WriteAt(p, off)
}

func (ff *faultFile) Truncate(size int64) error {
	if err := ff.f.check(OpTruncate, ff.Name()); err != nil {
		return err
	}
	return ff.File.Truncate(size)
}

func (ff *faultFile) SyncData() error {
	if err := ff.f.check(OpSync, ff.Name()); err != nil {
		return err
	}
	return ff.File.SyncData()
}

func (ff *faultFile) Close() error {
	if ff.closed.CompareAndSwap(false, true) {
		ff.f.open.Add(-1)
	}
	if err := ff.f.check(OpClose, ff.Name()); err != nil {
		_ = ff.File.Close()
		return err
	}
	return ff.File.Close()
}
