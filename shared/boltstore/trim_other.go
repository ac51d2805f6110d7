//go:build !linux

package boltstore

import bolt "go.etcd.io/bbolt"

// Trim is a no-op where the kernel's accounting of mapped pages is not a concern here.
func (s *Store) Trim() error { return nil }

// Trim is a no-op here; see the Linux version.
func Trim(*bolt.DB) error { return nil }

func mappedResident() int64 { return 0 }
