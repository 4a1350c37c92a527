package cli

import (
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentexec/agentexec/config"
	"github.com/agentexec/agentexec/host"
	"github.com/agentexec/agentexec/jobs"
	"github.com/spf13/cobra"
)

func newConfigCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show or start the configuration"}
	o := &setupOptions{}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration and where each value came from",
		Long: `Print every key of the effective configuration as TOML, each followed by
where its value came from: the embedded default, file:line, or a flag. Give
the flags you give call, mcp or serve to see what they would use.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.load(cmd)
			if err != nil {
				return err
			}
			named := ""
			switch {
			case cmd.Flags().Changed("config"):
				named = "--config"
			case os.Getenv("AGENTEXEC_CONFIG") != "":
				named = "$AGENTEXEC_CONFIG"
			}
			printConfig(stdout, cfg, named)
			if cfg.Sandbox.Network.Mode == "allowlist" {
				wd := cfg.Workspace
				if wd == "" {
					wd, _ = os.Getwd()
				}
				fmt.Fprintln(stdout, "\n# the sandbox's network, as resolved now:")
				for _, line := range networkLines(cfg, wd) {
					fmt.Fprintln(stdout, "# "+line)
				}
			}
			return nil
		},
	}
	// The flags of call, mcp and serve, so that `config show` with the
	// same flags prints what they would use.
	o.addPolicyFlags(show.Flags())
	o.addToolFlags(show.Flags())
	o.addCallFlags(show.Flags())
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

// printConfig writes the effective configuration as TOML, every key
// (config.Entries) with where its value came from.
func printConfig(w io.Writer, c *config.Config, named string) {
	file := c.File
	if file == "" {
		file = "(none: the embedded default)"
	} else if named != "" {
		file += " (named by " + named + ")"
	}
	fmt.Fprintf(w, "# configuration file: %s\n", file)
	fmt.Fprintf(w, "# each value is followed by where it came from: default, file:line or flag\n")
	fmt.Fprintf(w, "# (and, for empty paths, what they mean here and which environment variable decided)\n")
	table := ""
	for _, e := range c.Entries() {
		if e.Table != table {
			table = e.Table
			fmt.Fprintf(w, "\n[%s]\n", table)
		}
		name := e.Key[strings.LastIndexByte(e.Key, '.')+1:]
		src := c.Source(e.Key)
		if v, ok := e.Value.(string); ok && v == "" {
			if eff := effective[e.Key]; eff != nil {
				src += "; " + eff()
			}
		}
		fmt.Fprintf(w, "%-40s # %s\n", name+" = "+tomlValue(e.Value), src)
	}
	for i, r := range c.Rules {
		fmt.Fprintf(w, "\n[[rules]]  # %s\n", c.Source(fmt.Sprintf("rules[%d]", i)))
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

// effective says what an empty value of some keys means here, and which
// environment variable decided it.
var effective = map[string]func() string{
	"workspace": func() string {
		wd, _ := os.Getwd()
		return "empty: the current directory, " + wd
	},
	"audit.path": func() string {
		from := "$HOME"
		if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
			from = "env $XDG_STATE_HOME"
		}
		return "empty: " + host.DefaultAuditPath() + " (from " + from + ")"
	},
	"jobs.state_dir": func() string {
		from := "$XDG_RUNTIME_DIR unset"
		if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
			from = "env $XDG_RUNTIME_DIR"
		}
		return "empty: " + jobs.DefaultStateDir() + " (from " + from + ")"
	},
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
		v = x
	case encoding.TextMarshaler:
		b, _ := x.MarshalText()
		v = string(b)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
