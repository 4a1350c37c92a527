package config

import (
	"strings"

	"github.com/BurntSushi/toml"
)

// tomlLine is one meaningful line of a TOML file: a table header or a key.
type tomlLine struct {
	n     int    // line number, from 1
	table string // the table the line is in, or its header names
	key   string // "" for a header
	rule  int    // index of the [[rules]] entry the line is in, or -1
}

// scan reads the lines of text that matter for error positions. Keys are
// taken from the start of "key = value" lines (quotes removed); values
// spanning several lines are not followed, which is enough to place keys.
func scan(text string) []tomlLine {
	var out []tomlLine
	table, rule := "", -1
	for i, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
			continue
		case strings.HasPrefix(l, "[["):
			table = strings.TrimSpace(strings.Trim(strings.SplitN(l, "#", 2)[0], "[] \t"))
			if table == "rules" {
				rule++
			}
			out = append(out, tomlLine{n: i + 1, table: table, rule: rule})
		case strings.HasPrefix(l, "["):
			table = strings.TrimSpace(strings.Trim(strings.SplitN(l, "#", 2)[0], "[] \t"))
			rule = -1
			out = append(out, tomlLine{n: i + 1, table: table, rule: rule})
		default:
			k, _, ok := strings.Cut(l, "=")
			if !ok {
				continue
			}
			k = strings.Trim(strings.TrimSpace(k), `"'`)
			out = append(out, tomlLine{n: i + 1, table: table, key: k, rule: rule})
		}
	}
	return out
}

// lineOfName finds the line of a dotted key such as "tools.enabled", or
// of the table header when the key is not written; 0 when absent.
func lineOfName(text, name string) int {
	table, key := "", name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		table, key = name[:i], name[i+1:]
	}
	header := 0
	for _, l := range scan(text) {
		if l.table == table && l.key == key {
			return l.n
		}
		// A dotted key written in its parent table: tools.grace = "1s".
		if table != "" && l.key == name && l.table == "" {
			return l.n
		}
		if l.key == "" && (l.table == name || l.table == table) && header == 0 {
			header = l.n
		}
	}
	return header
}

// lineOf is lineOfName for a decoded key path.
func lineOf(text string, k toml.Key) int { return lineOfName(text, strings.Join(k, ".")) }

// lineOfRule finds the line of field in the index-th [[rules]] entry, or
// the entry's header.
func lineOfRule(text string, index int, field string) int {
	header := 0
	for _, l := range scan(text) {
		if l.rule != index || l.table != "rules" {
			continue
		}
		if l.key == "" {
			header = l.n
		}
		if field != "" && l.key == field {
			return l.n
		}
	}
	return header
}
