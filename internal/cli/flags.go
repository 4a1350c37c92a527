package cli

import (
	"fmt"
	"github.com/agentexec/agentexec/config"
	"strconv"
	"strings"
	"time"

	"github.com/agentexec/agentexec/capture"
)

// durationFlag is a non-negative duration; 0 can mean "none".
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string { return f.d.String() }
func (f durationFlag) Type() string   { return "duration" }
func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("want a duration with a unit, such as %gs, 500ms or 2m", n)
		}
		return fmt.Errorf("want a duration such as 30s, 500ms, 2m or 1h30m")
	}
	if d < 0 {
		return fmt.Errorf("want a duration that is not negative, such as 30s")
	}
	*f.d = d
	return nil
}

// sizeFlag is a byte count written as 65536, 64KiB, 1MiB, 1MB or 2GiB.
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string { return strconv.FormatInt(*f.n, 10) }
func (f sizeFlag) Type() string   { return "size" }
func (f sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

func parseSize(s string) (int64, error) { return config.ParseSize(s) }

// envFlag collects repeated KEY=value entries.
type envFlag struct{ entries *[]string }

func (f envFlag) String() string { return strings.Join(*f.entries, ",") }
func (f envFlag) Type() string   { return "KEY=value" }
func (f envFlag) Set(s string) error {
	k, _, ok := strings.Cut(s, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t\x00") || strings.ContainsRune(s, 0) {
		return fmt.Errorf("want KEY=value, such as --env FOO=bar")
	}
	*f.entries = append(*f.entries, s)
	return nil
}

// strategyFlag is head, tail or middle.
type strategyFlag struct{ s *capture.Strategy }

func (f strategyFlag) String() string { return f.s.String() }
func (f strategyFlag) Type() string   { return "head|tail|middle" }
func (f strategyFlag) Set(s string) error {
	v, err := capture.ParseStrategy(s)
	if err != nil {
		return fmt.Errorf("want head, tail or middle")
	}
	*f.s = v
	return nil
}
