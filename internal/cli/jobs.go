package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentexec/agentexec/jobs"
	"github.com/spf13/cobra"
)

func newJobsCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &setupOptions{}
	manager := func(cmd *cobra.Command) (*jobs.Manager, error) {
		cfg, err := o.load(cmd)
		if err != nil {
			return nil, err
		}
		return &jobs.Manager{StateDir: cfg.Jobs.StateDir}, nil
	}
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List background jobs (of CLI calls and of servers running as this user)",
		Long: `List the background jobs in the state directory: those started by one-shot
agentexec call invocations and by agentexec mcp or serve running as the same
user. "lost" means the job's owner is gone without recording its end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := manager(cmd)
			if err != nil {
				return err
			}
			list, err := m.List("")
			if err != nil {
				return &exitError{code: ExitFailed, msg: err.Error()}
			}
			w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tPID\tSTATE\tAGE\tOUTPUT\tCOMMAND")
			for _, j := range list {
				size := "-"
				if fi, err := os.Stat(j.JobDir + "/output"); err == nil {
					size = humanSize(fi.Size() + j.Dropped - j.HeaderLen)
				}
				age := "-"
				if !j.Started.IsZero() {
					age = time.Since(j.Started).Round(time.Second).String()
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", j.ID, j.Pid, j.Describe(), age, size, oneLine(j.Command, 60))
			}
			err = w.Flush()
			for _, j := range list {
				if j.Note != "" {
					fmt.Fprintf(stderr, "agentexec: %s: %s\n", j.ID, j.Note)
				}
			}
			return err
		},
	}
	o.addPolicyFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&o.stateDir, "state-dir", "", "the jobs' state directory (default: the configuration's)")

	var follow bool
	logs := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's output (-f: follow it until the job ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := manager(cmd)
			if err != nil {
				return err
			}
			ctx, _, stop := interruptible(cmd.Context())
			defer stop()
			offset := int64(0)
			for {
				p, err := m.ReadOutput(args[0], "", offset, jobs.MaxPageBytes, false)
				if err != nil {
					return &exitError{code: ExitFailed, msg: err.Error()}
				}
				if p.Dropped > 0 {
					fmt.Fprintf(stderr, "agentexec: %d earlier bytes were dropped (output cap)\n", p.Dropped)
				}
				stdout.Write(p.Data)
				offset = p.Next
				if !p.EOF {
					continue
				}
				if !follow || p.Ended {
					return nil
				}
				if err := m.WaitOutput(ctx, args[0], "", offset, time.Second); err != nil {
					return nil
				}
			}
		},
	}
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the job ends")
	kill := &cobra.Command{
		Use:   "kill ID",
		Short: "Stop a job and everything it started",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := manager(cmd)
			if err != nil {
				return err
			}
			info, err := m.Kill(context.Background(), args[0], "", 2*time.Second)
			if err != nil {
				return &exitError{code: ExitFailed, msg: err.Error()}
			}
			fmt.Fprintf(stdout, "%s: %s\n", info.ID, info.Describe())
			return nil
		},
	}
	rm := &cobra.Command{
		Use:   "rm ID",
		Short: "Remove an ended job's directory",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := manager(cmd)
			if err != nil {
				return err
			}
			if err := m.Remove(args[0], ""); err != nil {
				return &exitError{code: ExitFailed, msg: err.Error()}
			}
			return nil
		},
	}
	cmd.AddCommand(logs, kill, rm)
	return cmd
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
