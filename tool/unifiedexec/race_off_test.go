//go:build !race

package unifiedexec

const raceEnabled = false
