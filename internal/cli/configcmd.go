package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/agentexec/agentexec/config"
	"github.com/spf13/cobra"
)

func newConfigCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show or start the configuration"}
	o := &setupOptions{}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration and where each value came from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.load(cmd)
			if err != nil {
				return err
			}
			printConfig(stdout, cfg)
			return nil
		},
	}
	o.addPolicyFlags(show.Flags())
	var force bool
	initCmd := &cobra.Command{
		Use:   "init [FILE]",
		Short: "Write a commented starter configuration (default ./agentexec.toml)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "agentexec.toml"
			if len(args) == 1 {
				path = args[0]
			}
			flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
			if force {
				flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			}
			f, err := os.OpenFile(path, flags, 0o644)
			if err != nil {
				if os.IsExist(err) {
					return &exitError{code: ExitFailed, msg: path + " exists; use --force to replace it"}
				}
				return &exitError{code: ExitFailed, msg: err.Error()}
			}
			defer f.Close()
			if _, err := f.WriteString(config.Default()); err != nil {
				return &exitError{code: ExitFailed, msg: err.Error()}
			}
			fmt.Fprintf(stdout, "wrote %s\n", path)
			return nil
		},
	}
	initCmd.Flags().BoolVar(&force, "force", false, "replace an existing file")
	cmd.AddCommand(show, initCmd)
	return cmd
}

// printConfig writes the configuration as TOML with each value's source.
func printConfig(w io.Writer, c *config.Config) {
	file := c.File
	if file == "" {
		file = "(none: the embedded default)"
	}
	fmt.Fprintf(w, "# configuration file: %s\n", file)
	line := func(key string, v any) {
		name := key[strings.LastIndexByte(key, '.')+1:]
		fmt.Fprintf(w, "%-30s # %s\n", name+" = "+tomlValue(v), c.Source(key))
	}
	line("workspace", c.Workspace)
	line("profile", c.Profile)
	fmt.Fprintln(w, "\n[env]")
	line("env.pass", c.Env.Pass)
	line("env.set", c.Env.Set)
	fmt.Fprintln(w, "\n[tools]")
	line("tools.enabled", c.Tools.Enabled)
	line("tools.names", c.Tools.Names)
	line("tools.grace", time.Duration(c.Tools.Grace).String())
	fmt.Fprintln(w, "\n[tools.shell_exec]")
	line("tools.shell_exec.allow_executables", c.Tools.ShellExec.AllowExecutables)
	line("tools.shell_exec.deny_executables", c.Tools.ShellExec.DenyExecutables)
	line("tools.shell_exec.require_approval_for_unknown", c.Tools.ShellExec.RequireApprovalForUnknown)
	line("tools.shell_exec.default_timeout", time.Duration(c.Tools.ShellExec.DefaultTimeout).String())
	fmt.Fprintln(w, "\n[grants]")
	line("grants.tools", c.Grants.Tools)
	line("grants.fs", c.Grants.FS)
	fmt.Fprintln(w, "\n[audit]")
	line("audit.path", c.Audit.Path)
	line("audit.max_size", int64(c.Audit.MaxSize))
	line("audit.keep", c.Audit.Keep)
	line("audit.fail_closed", c.Audit.FailClosed)
	fmt.Fprintln(w, "\n[jobs]")
	line("jobs.state_dir", c.Jobs.StateDir)
	for _, r := range c.Rules {
		fmt.Fprintf(w, "\n[[rules]]  # %s\n", c.Source("rules"))
		b, _ := json.Marshal(r)
		var m map[string]any
		json.Unmarshal(b, &m)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if v := m[k]; v != nil && v != "" {
				fmt.Fprintf(w, "%s = %s\n", k, tomlValue(v))
			}
		}
	}
}

// tomlValue writes a value as TOML: strings quoted, arrays and inline
// tables.
func tomlValue(v any) string {
	switch x := v.(type) {
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = tomlValue(k) + " = " + tomlValue(x[k])
		}
		if len(parts) == 0 {
			return "{}"
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case []string:
		if x == nil {
			x = []string{}
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}
