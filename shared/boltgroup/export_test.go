package boltgroup

// Queued is how many changes wait for the committer (for tests that line a group up).
func Queued(c *Committer) int { return len(c.writes) }
