package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentexec/agentexec/tool"
	"github.com/spf13/cobra"
)

// toolInfo is how `agentexec tools --json` describes one tool.
type toolInfo struct {
	Name         string           `json:"name"`
	Contract     string           `json:"contract"`
	Description  string           `json:"description"`
	InputSchema  json.RawMessage  `json:"input_schema"`
	OutputSchema json.RawMessage  `json:"output_schema,omitempty"`
	Annotations  tool.Annotations `json:"annotations"`
}

func describeTools(r *tool.Registry, call *tool.Call) []toolInfo {
	var out []toolInfo
	for _, e := range r.List() {
		ti := toolInfo{Name: e.Name, Contract: e.Tool.Name(), Description: e.Tool.Description(call), InputSchema: e.Tool.InputSchema()}
		if os, ok := e.Tool.(tool.OutputSchemer); ok {
			ti.OutputSchema = os.OutputSchema()
		}
		if an, ok := e.Tool.(tool.Annotator); ok {
			ti.Annotations = an.Annotations()
		}
		out = append(out, ti)
	}
	return out
}

func newToolsCmd(stdout io.Writer) *cobra.Command {
	o := &setupOptions{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the registered tools with their descriptions and JSON schemas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.auditLog = "off"
			h, err := o.host(cmd, nil)
			if err != nil {
				return err
			}
			defer h.Close()
			infos := describeTools(h.Registry, h.Call(""))
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(infos)
			}
			for i, ti := range infos {
				if i > 0 {
					fmt.Fprintln(stdout)
				}
				title := ti.Name
				if ti.Contract != ti.Name {
					title += " (contract " + ti.Contract + ")"
				}
				fmt.Fprintf(stdout, "== %s\n%s\n\ninput schema:\n%s\n", title, ti.Description, indentJSON(ti.InputSchema))
				if ti.OutputSchema != nil {
					fmt.Fprintf(stdout, "output schema:\n%s\n", indentJSON(ti.OutputSchema))
				}
			}
			return nil
		},
	}
	o.addPolicyFlags(cmd.Flags())
	o.addToolFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func indentJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "  ", "  ")
	return "  " + strings.TrimSpace(string(b))
}
