package analysis

import (
	"errors"
	"fmt"
	"reflect"
	"text/template"
)

// renderBudget bounds the bytes a query's functions may make in one
// rendering, whether or not the result is written. The written output has
// its own cap (maxRendered), but a template can build strings it never
// writes: {{ $x = print $x $x }} doubles $x in 18 bytes, so a query of the
// allowed 4 KiB could ask for 2^200 bytes, and the policy webhook renders
// every query it admits. With both caps, rendering a query of the allowed
// size allocates a small multiple of their sum (the fuzz target
// FuzzQueryCost holds it under 64 MiB for a wave of 5,000 pods).
const renderBudget = 8 << 20

// maxPadding bounds a printf width or precision: fmt allocates the whole
// padding before the budget could see the result.
const maxPadding = 256

// errBudget stops a rendering whose functions spent their budget.
var errBudget = errors.New("over the query's render budget")

// budget is what is left of a rendering's renderBudget.
type budget struct {
	left int
	over bool
}

// take spends n bytes, or refuses them and remembers why the rendering
// stopped.
func (b *budget) take(n int) error {
	if b == nil { // parsing: the names only, never called
		return nil
	}
	if n > b.left {
		b.over = true
		return errBudget
	}
	b.left -= n
	return nil
}

// budgeted replaces text/template's builtin functions that make new
// strings with ones that spend b before they allocate: an upper bound of
// the result is taken from the budget first. The others (and, or, not,
// len, index, slice, the comparisons) return what they were given or a
// number. The behaviour is the builtins', so a query that rendered before
// renders the same.
func budgeted(b *budget) template.FuncMap {
	// escaped wraps an escaper whose output is at most grow times its
	// input (the fmt.Sprint of its arguments).
	escaped := func(escape func(...any) string, grow int) func(...any) (string, error) {
		return func(args ...any) (string, error) {
			if err := b.take(grow * printedSize(args)); err != nil {
				return "", err
			}
			return escape(args...), nil
		}
	}
	return template.FuncMap{
		"print": func(args ...any) (string, error) {
			if err := b.take(printedSize(args)); err != nil {
				return "", err
			}
			return fmt.Sprint(args...), nil
		},
		"println": func(args ...any) (string, error) {
			if err := b.take(printedSize(args) + len(args) + 1); err != nil {
				return "", err
			}
			return fmt.Sprintln(args...), nil
		},
		"printf": func(format string, args ...any) (string, error) {
			verbs, times, err := printfVerbs(format)
			if err != nil {
				return "", err
			}
			widest := 0
			for _, a := range args {
				widest = max(widest, sizeOf(reflect.ValueOf(a), 0))
			}
			// Each verb pads to maxPadding at most, or writes a bad verb's
			// "%!v(type=" around its argument; arguments no verb takes are
			// printed after "%!(EXTRA".
			if err := b.take(len(format) + times*widest + verbs*(maxPadding+32) + printedSize(args) + 16*len(args)); err != nil {
				return "", err
			}
			return fmt.Sprintf(format, args...), nil
		},
		// Escaping makes at most six bytes of one ("<" is "&lt;" in html,
		// "\u003C" in js; urlquery makes three).
		"html":     escaped(template.HTMLEscaper, 6),
		"js":       escaped(template.JSEscaper, 6),
		"urlquery": escaped(template.URLQueryEscaper, 3),
	}
}

// printedSize bounds the length of fmt.Sprint(args...): each argument's
// size and a separator.
func printedSize(args []any) int {
	n := 0
	for _, a := range args {
		n += sizeOf(reflect.ValueOf(a), 0) + 1
	}
	return n
}

// sizeOf bounds how long v prints with %v: a string's length, a map's or
// slice's elements with their keys and separators, and a constant for
// anything else a template can hold (numbers, booleans, nil). A query's
// data is a map of strings, so the walk is shallow; depth stops a cycle
// anyway.
func sizeOf(v reflect.Value, depth int) int {
	const scalar = 64
	if !v.IsValid() || depth > 4 {
		return scalar
	}
	switch v.Kind() {
	case reflect.String:
		return v.Len() + 2
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return scalar
		}
		return sizeOf(v.Elem(), depth+1)
	case reflect.Map:
		n := 8
		for it := v.MapRange(); it.Next(); {
			n += sizeOf(it.Key(), depth+1) + sizeOf(it.Value(), depth+1) + 2
		}
		return n
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return 2*v.Len() + 2
		}
		n := 8
		for i := range v.Len() {
			n += sizeOf(v.Index(i), depth+1) + 1
		}
		return n
	}
	return scalar
}

// printfVerbs reads a printf format's verbs: how many, and how many times
// over the widest argument they may print it together (a verb may print
// any argument, "%[1]s%[1]s"; %q quotes a byte in at most four, %x writes
// two, "% #x" five, %#v quotes as %q does). It refuses what would make fmt
// allocate more than the budget can see: a width or precision above
// maxPadding, or one taken from an argument ("%*d").
func printfVerbs(format string) (verbs, times int, err error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		if i < len(format) && format[i] == '%' {
			continue
		}
		// Flags, an argument index, then width, '.', precision, in any
		// order fmt accepts; each number is read whole.
		sharp, space := false, false
	flags:
		for ; i < len(format); i++ {
			switch c := format[i]; {
			case c == '*':
				return 0, 0, errors.New("printf takes no width or precision from an argument (*) in a query")
			case c >= '0' && c <= '9':
				n := 0
				for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
					if n = n*10 + int(format[i]-'0'); n > maxPadding {
						return 0, 0, fmt.Errorf("printf widths and precisions in a query are at most %d", maxPadding)
					}
				}
				i--
			case c == '#':
				sharp = true
			case c == ' ':
				space = true
			case c == '+' || c == '-' || c == '.' || c == '[' || c == ']':
			default:
				break flags
			}
		}
		verbs++
		verb := byte(0)
		if i < len(format) {
			verb = format[i]
		}
		switch {
		case (verb == 'x' || verb == 'X') && space:
			times += 5
		case verb == 'x' || verb == 'X':
			times += 2
		case verb == 'q' || sharp:
			times += 4
		default:
			times++
		}
	}
	return verbs, times, nil
}
