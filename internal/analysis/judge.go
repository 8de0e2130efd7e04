package analysis

import (
	"math"
	"strconv"
	"strings"
)

// Bounds of a query check: Max, Min or both (the admission webhook
// refuses neither), and a Tolerance >= 0 used against the control group.
type Bounds struct {
	Max, Min  *float64
	Tolerance float64
}

// Judge says whether value passes b, and why, in a short sentence with the
// numbers ("0.2 > max 0.01").
//
// Without control the bounds are absolute: value <= Max and value >= Min.
// With control, the control group's value over the same window, they are
// relative to it instead: value fails above control+Tolerance when Max is
// set, below control-Tolerance when Min is set. The absolute bounds are
// then not applied: a dependency that fails for everyone raises the error
// rate of both groups, and is not the wave's doing.
//
// A value that is not a number fails (Query reports those as NoData, which
// the caller decides about before judging), as do bounds with neither Max
// nor Min: a check that can pass nothing is safer than one that passes all.
func Judge(b Bounds, value float64, control *float64) (pass bool, why string) {
	if b.Max == nil && b.Min == nil {
		return false, "the check has neither max nor min"
	}
	if !finite(value) {
		return false, "the value " + num(value) + " is not a number"
	}
	if control != nil && !finite(*control) {
		return false, "the rest's value " + num(*control) + " is not a number"
	}

	// Each bound set: the limit the value is held to, and how it is named.
	type limit struct {
		upper bool
		at    float64
		name  string
	}
	var limits []limit
	if b.Max != nil {
		if control == nil {
			limits = append(limits, limit{true, *b.Max, "max " + num(*b.Max)})
		} else {
			limits = append(limits, limit{true, *control + b.Tolerance, relative(*control, "+", b.Tolerance)})
		}
	}
	if b.Min != nil {
		if control == nil {
			limits = append(limits, limit{false, *b.Min, "min " + num(*b.Min)})
		} else {
			limits = append(limits, limit{false, *control - b.Tolerance, relative(*control, "-", b.Tolerance)})
		}
	}

	var held []string
	for _, l := range limits {
		ok, holds, breaks := value <= l.at, "<=", ">"
		if !l.upper {
			ok, holds, breaks = value >= l.at, ">=", "<"
		}
		if !ok {
			return false, numAgainst(value, l.at) + " " + breaks + " " + l.name
		}
		held = append(held, holds+" "+l.name)
	}
	return true, num(value) + " " + strings.Join(held, " and ")
}

// relative names a limit set by the control group.
func relative(control float64, sign string, tolerance float64) string {
	s := "rest " + num(control)
	if tolerance != 0 {
		s += " " + sign + " tolerance " + num(tolerance)
	}
	return s
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// num writes a number compactly: four significant digits say enough of a
// rate or a latency.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// numAgainst writes value with enough digits to tell it from limit: a
// failing 0.010001 shown as "0.01 > max 0.01" would read as a bug.
func numAgainst(value, limit float64) string {
	if s := num(value); s != num(limit) {
		return s
	}
	return strconv.FormatFloat(value, 'g', -1, 64)
}
