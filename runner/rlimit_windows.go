package runner

// openFileLimit is unknown on Windows, which has no RLIMIT_NOFILE.
func openFileLimit() (uint64, bool) { return 0, false }
