package boltstore

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// Trim drops the store file's pages from this process's resident set. bbolt reads through a
// read-only shared mapping of the file, and the kernel counts every page of it the process has
// touched as the process's memory, so a file of a million records would keep the process at the
// file's size. MADV_DONTNEED on a shared file mapping only unmaps the pages: they stay in the
// page cache, and the next read of one costs a minor fault.
//
// It runs inside a read transaction, which holds bbolt's mmap lock, so the mapping cannot be
// replaced while it is advised. The mapping is read from bbolt's unexported field; the test
// fails if a bbolt upgrade renames it.
func (s *Store) Trim() error { return Trim(s.db) }

// Trim drops db's mapped pages from the resident set; see (*Store).Trim. Other components that
// keep their own bbolt file (the provider simulator) use it too.
func Trim(db *bolt.DB) error {
	return db.View(func(*bolt.Tx) error {
		addr, size, err := mapping(db)
		if err != nil || size == 0 {
			return err
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, uintptr(size), syscall.MADV_DONTNEED); errno != 0 {
			return errno
		}
		return nil
	})
}

var errNoMapping = errors.New("boltstore: bbolt's mapping is not where this version expects it")

func mapping(db *bolt.DB) (addr uintptr, size int, err error) {
	f := reflect.ValueOf(db).Elem().FieldByName("dataref")
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return 0, 0, errNoMapping
	}
	if f.Len() == 0 {
		return 0, 0, nil
	}
	return f.Pointer(), f.Len(), nil
}

// mappedResident is the process's resident file-backed and shared memory in bytes, from the
// third field of /proc/self/statm; 0 if unreadable.
func mappedResident() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[2], 10, 64)
	return pages * int64(os.Getpagesize())
}
