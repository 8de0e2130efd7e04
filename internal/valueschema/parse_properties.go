package valueschema

import (
	"fmt"
	"strconv"
	"strings"
)

// parseProperties reads Java .properties: key=value, key:value or key value; # and ! comments;
// a line ending in an odd number of backslashes continues on the next; \t \n \r \f \uXXXX
// escapes. Later duplicates win.
func (d *document) parseProperties() *parseError {
	lr := newLineReader(d.raw)
	m := map[string]any{}
	d.positions = map[string]position{}
	const ws = " \t\f"
	for i := 0; i < len(lr.lines); i++ {
		line := lr.lines[i]
		start := leadingSpace(line, ws)
		rest := line[start:]
		if rest == "" || rest[0] == '#' || rest[0] == '!' {
			continue
		}
		lineNo, col := i+1, lr.col(i, start)
		logical := rest
		for endsWithContinuation(logical) && i+1 < len(lr.lines) {
			i++
			next := lr.lines[i]
			logical = logical[:len(logical)-1] + next[leadingSpace(next, ws):]
		}
		if endsWithContinuation(logical) {
			logical = logical[:len(logical)-1]
		}
		// Key: up to the first unescaped separator.
		k := 0
		for k < len(logical) {
			c := logical[k]
			if c == '\\' {
				k += 2
				continue
			}
			if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
				break
			}
			k++
		}
		if k > len(logical) {
			k = len(logical)
		}
		rawKey, val := logical[:k], logical[k:]
		val = val[leadingSpace(val, ws):]
		if val != "" && (val[0] == '=' || val[0] == ':') {
			val = val[1:]
			val = val[leadingSpace(val, ws):]
		}
		key, err := unescapeProperties(rawKey)
		if err != nil {
			return d.lineError(Properties, lineNo, col, truncate(rawKey, 40), err.Error())
		}
		value, err := unescapeProperties(val)
		if err != nil {
			return d.lineError(Properties, lineNo, col, truncate(val, 40), err.Error())
		}
		m[key] = value
		d.positions[pointer([]string{key})] = position{lineNo, col}
	}
	d.value = m
	return nil
}

func endsWithContinuation(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func unescapeProperties(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \uxxxx escape in %q`, truncate(s, 40))
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \uxxxx escape in %q`, truncate(s, 40))
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
