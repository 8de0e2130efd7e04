package valueschema

import (
	"fmt"
	"strings"
)

// parseEnv reads dotenv: KEY=VALUE lines, an optional `export ` prefix, # comment lines,
// "double-quoted" values with \n \r \t \" \\ escapes, 'single-quoted' literal values (both may
// span lines), and unquoted values whose ` #` starts a comment. Later duplicates win.
func (d *document) parseEnv() *parseError {
	lr := newLineReader(d.raw)
	m := map[string]any{}
	d.positions = map[string]position{}
	for i := 0; i < len(lr.lines); i++ {
		line := lr.lines[i]
		start := leadingSpace(line, " \t")
		rest := line[start:]
		if rest == "" || rest[0] == '#' {
			continue
		}
		if after, ok := strings.CutPrefix(rest, "export"); ok && after != "" && (after[0] == ' ' || after[0] == '\t') {
			n := leadingSpace(after, " \t")
			start += len("export") + n
			rest = after[n:]
		}
		lineNo, col := i+1, lr.col(i, start)
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return d.lineError(Env, lineNo, col, truncate(rest, 40), fmt.Sprintf("line %d: expected KEY=VALUE", lineNo))
		}
		key := strings.TrimRight(rest[:eq], " \t")
		if !validEnvKey(key) {
			return d.lineError(Env, lineNo, col, truncate(key, 40), fmt.Sprintf("line %d: %q is not a valid variable name (letters, digits, _ and ., not starting with a digit)", lineNo, key))
		}
		val := rest[eq+1:]
		val = val[leadingSpace(val, " \t"):]
		var value string
		if val != "" && (val[0] == '"' || val[0] == '\'') {
			q := val[0]
			var b strings.Builder
			body := val[1:]
			closed := false
			for !closed {
				j := 0
				for ; j < len(body); j++ {
					c := body[j]
					if c == q {
						closed = true
						break
					}
					if q == '"' && c == '\\' && j+1 < len(body) {
						j++
						switch body[j] {
						case 'n':
							b.WriteByte('\n')
						case 'r':
							b.WriteByte('\r')
						case 't':
							b.WriteByte('\t')
						default:
							b.WriteByte(body[j])
						}
						continue
					}
					b.WriteByte(c)
				}
				if closed {
					tail := strings.TrimSpace(body[j+1:])
					if tail != "" && tail[0] != '#' {
						return d.lineError(Env, i+1, 0, truncate(tail, 40), fmt.Sprintf("line %d: unexpected text after the closing quote", i+1))
					}
					break
				}
				if i+1 >= len(lr.lines) {
					return d.lineError(Env, lineNo, col, truncate(val, 40), fmt.Sprintf("line %d: unterminated quoted value", lineNo))
				}
				b.WriteByte('\n')
				i++
				body = lr.lines[i]
			}
			value = b.String()
		} else {
			if j := strings.Index(val, " #"); j >= 0 {
				val = val[:j]
			} else if j := strings.Index(val, "\t#"); j >= 0 {
				val = val[:j]
			}
			value = strings.TrimSpace(val)
		}
		m[key] = value
		d.positions[pointer([]string{key})] = position{lineNo, col}
	}
	d.value = m
	return nil
}

func validEnvKey(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
