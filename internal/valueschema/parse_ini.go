package valueschema

import (
	"fmt"
	"strings"
)

// parseINI reads INI: [section] headers, key = value or key: value, ; and # comment lines.
// Keys before any section are top-level members; each section is an object of strings.
// Values are trimmed and kept verbatim (no inline comments, no quote removal). Repeated sections
// merge; later keys win.
func (d *document) parseINI() *parseError {
	lr := newLineReader(d.raw)
	m := map[string]any{}
	d.positions = map[string]position{}
	var section map[string]any
	var sectionName string
	for i, line := range lr.lines {
		start := leadingSpace(line, " \t")
		rest := strings.TrimRight(line[start:], " \t")
		if rest == "" || rest[0] == ';' || rest[0] == '#' {
			continue
		}
		lineNo, col := i+1, lr.col(i, start)
		if rest[0] == '[' {
			if !strings.HasSuffix(rest, "]") {
				return d.lineError(INI, lineNo, col, truncate(rest, 40), "section header must end with ]")
			}
			name := strings.TrimSpace(rest[1 : len(rest)-1])
			if name == "" {
				return d.lineError(INI, lineNo, col, truncate(rest, 40), "empty section name")
			}
			switch existing := m[name].(type) {
			case map[string]any:
				section = existing
			case nil:
				section = map[string]any{}
				m[name] = section
				d.positions[pointer([]string{name})] = position{lineNo, col}
			default:
				return d.lineError(INI, lineNo, col, truncate(rest, 40), fmt.Sprintf("section [%s] has the name of a top-level key", name))
			}
			sectionName = name
			continue
		}
		sep := strings.IndexAny(rest, "=:")
		if sep < 0 {
			return d.lineError(INI, lineNo, col, truncate(rest, 40), fmt.Sprintf("line %d: expected key = value or [section]", lineNo))
		}
		key := strings.TrimSpace(rest[:sep])
		value := strings.TrimSpace(rest[sep+1:])
		if key == "" {
			return d.lineError(INI, lineNo, col, truncate(rest, 40), fmt.Sprintf("line %d: empty key", lineNo))
		}
		if section == nil {
			m[key] = value
			d.positions[pointer([]string{key})] = position{lineNo, col}
		} else {
			section[key] = value
			d.positions[pointer([]string{sectionName, key})] = position{lineNo, col}
		}
	}
	d.value = m
	return nil
}
