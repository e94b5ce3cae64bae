package vfs

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func readAll(t *testing.T, fsys FS, name string) []byte {
	t.Helper()
	b, err := ReadFile(fsys, name, 1<<20)
	require.NoError(t, err)
	return b
}

func write(t *testing.T, f File, off int64, s string) {
	t.Helper()
	_, err := f.WriteAt([]byte(s), off)
	require.NoError(t, err)
}

// Both implementations behave alike on the operations the log uses.
func TestFSBasics(t *testing.T) {
	for name, mk := range map[string]func(t *testing.T) (FS, string){
		"os":  func(t *testing.T) (FS, string) { return OS, t.TempDir() },
		"mem": func(t *testing.T) (FS, string) { return NewMem(), "/data" },
	} {
		t.Run(name, func(t *testing.T) {
			fsys, root := mk(t)
			dir := filepath.Join(root, "p-0")
			require.NoError(t, fsys.MkdirAll(dir, 0o755))
			f, err := fsys.OpenFile(filepath.Join(dir, "a.log"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			require.NoError(t, err)
			write(t, f, 0, "hello world")
			require.NoError(t, f.Truncate(5))
			size, err := f.Size()
			require.NoError(t, err)
			require.EqualValues(t, 5, size)
			buf := make([]byte, 10)
			n, err := f.ReadAt(buf, 0)
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, "hello", string(buf[:n]))
			require.NoError(t, f.SyncData())
			require.NoError(t, f.Close())

			require.NoError(t, fsys.Rename(filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")))
			_, err = fsys.Stat(filepath.Join(dir, "a.log"))
			require.ErrorIs(t, err, fs.ErrNotExist)
			st, err := fsys.Stat(filepath.Join(dir, "b.log"))
			require.NoError(t, err)
			require.EqualValues(t, 5, st.Size)
			es, err := fsys.ReadDir(dir)
			require.NoError(t, err)
			require.Equal(t, []DirEntry{{Name: "b.log"}}, es)
			require.NoError(t, fsys.SyncDir(dir))

			_, err = fsys.OpenFile(filepath.Join(dir, "missing"), os.O_RDWR, 0)
			require.ErrorIs(t, err, fs.ErrNotExist)
			require.NoError(t, fsys.RemoveAll(dir))
			require.NoError(t, fsys.RemoveAll(dir), "removing a missing path is not an error")
			_, err = fsys.Stat(dir)
			require.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}

func TestMemCrashLosesUnsyncedData(t *testing.T) {
	m := NewMem()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	f, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	write(t, f, 0, "durable")
	require.NoError(t, f.SyncData())

	// The file's data is synced, but its name is not: a crash loses it.
	_, err = m.Crash(CrashOptions{}).Stat("/d/f")
	require.ErrorIs(t, err, fs.ErrNotExist)

	require.NoError(t, m.SyncDir("/d"))
	write(t, f, 7, " and not")
	require.NoError(t, f.Truncate(3)) // unsynced too
	after := m.Crash(CrashOptions{})
	require.Equal(t, "durable", string(readAll(t, after, "/d/f")))
	require.Equal(t, "dur", string(readAll(t, m, "/d/f")), "the crash does not change the live FS")
	require.Equal(t, "dur", string(readAll(t, m.Crash(CrashOptions{ProcessOnly: true}), "/d/f")),
		"a process kill keeps what the page cache holds")
}

func TestMemCrashRenameAndRemove(t *testing.T) {
	m := NewMem()
	f, err := m.OpenFile("/ckpt.tmp", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	write(t, f, 0, "new")
	require.NoError(t, f.SyncData())
	old, err := m.OpenFile("/ckpt", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	write(t, old, 0, "old")
	require.NoError(t, old.SyncData())
	require.NoError(t, m.Remove("/ckpt.tmp"))
	require.NoError(t, m.SyncDir("/"))
	require.Equal(t, "new", string(readAll(t, &memHandleFS{f}, "")), "an open handle outlives its name")

	// Rename without a directory sync: after a crash, either the old or
	// the new state, never a mixture, whatever prefix was journaled.
	f2, err := m.OpenFile("/ckpt.tmp", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	write(t, f2, 0, "new")
	require.NoError(t, f2.SyncData())
	require.NoError(t, m.Rename("/ckpt.tmp", "/ckpt"))
	seen := map[string]bool{}
	for i := range 64 {
		c := m.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(uint64(i), 1))})
		got := string(readAll(t, c, "/ckpt"))
		require.Contains(t, []string{"old", "new"}, got)
		seen[got] = true
	}
	require.Len(t, seen, 2, "random crashes keep some unsynced metadata changes")
	require.Equal(t, "old", string(readAll(t, m.Crash(CrashOptions{}), "/ckpt")))
}

func TestMemCrashRandomKeepsSyncedPrefix(t *testing.T) {
	m := NewMem()
	f, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, m.SyncDir("/"))
	write(t, f, 0, "0123456789")
	require.NoError(t, f.SyncData())
	write(t, f, 10, "abcdefghij")
	write(t, f, 20, "klmnopqrst")
	for i := range 64 {
		got := string(readAll(t, m.Crash(CrashOptions{Rand: rand.New(rand.NewPCG(uint64(i), 2))}), "/f"))
		require.GreaterOrEqual(t, len(got), 10)
		require.Equal(t, "0123456789", got[:10], "synced bytes always survive")
	}
}

// memHandleFS reads one open file, for checking handles of removed files.
type memHandleFS struct{ f File }

func (h *memHandleFS) OpenFile(string, int, os.FileMode) (File, error) { return nopClose{h.f}, nil }
func (h *memHandleFS) Remove(string) error                             { return nil }
func (h *memHandleFS) RemoveAll(string) error                          { return nil }
func (h *memHandleFS) Rename(string, string) error                     { return nil }
func (h *memHandleFS) MkdirAll(string, os.FileMode) error              { return nil }
func (h *memHandleFS) ReadDir(string) ([]DirEntry, error)              { return nil, nil }
func (h *memHandleFS) Stat(string) (FileInfo, error)                   { return FileInfo{}, nil }
func (h *memHandleFS) SyncDir(string) error                            { return nil }

type nopClose struct{ File }

func (nopClose) Close() error { return nil }

func TestFaults(t *testing.T) {
	f := NewFaults(NewMem())
	file, err := f.OpenFile("/a", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.Equal(t, 1, f.OpenFiles())

	f.SetInjector(func(op Op, path string) error {
		if op == OpWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	_, err = file.WriteAt([]byte("x"), 0)
	require.True(t, IsNoSpace(err), "got %v", err)
	require.NoError(t, file.SyncData())
	f.SetInjector(nil)
	_, err = file.WriteAt([]byte("x"), 0)
	require.NoError(t, err)

	f.SetMaxOpen(1)
	_, err = f.OpenFile("/b", os.O_RDWR|os.O_CREATE, 0o644)
	require.True(t, IsTooManyFiles(err), "got %v", err)
	require.NoError(t, file.Close())
	require.Equal(t, 0, f.OpenFiles())
	b, err := f.OpenFile("/b", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.Close(), os.ErrClosed, "a second close fails")
	require.Equal(t, 0, f.OpenFiles(), "and is not counted twice")
}
