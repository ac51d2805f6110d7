//go:build !linux

package boltstore

// Trim is a no-op where the kernel's accounting of mapped pages is not a concern here.
func (s *Store) Trim() error { return nil }
