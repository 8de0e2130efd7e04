package analysis

import (
	"math"
	"testing"
)

func f(v float64) *float64 { return &v }

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       Bounds
		value   float64
		control *float64
		pass    bool
		why     string
	}{
		// absolute
		{"under max", Bounds{Max: f(0.01)}, 0.001, nil, true, "0.001 <= max 0.01"},
		{"at max", Bounds{Max: f(0.01)}, 0.01, nil, true, "0.01 <= max 0.01"},
		{"over max", Bounds{Max: f(0.01)}, 0.2, nil, false, "0.2 > max 0.01"},
		{"just over max, digits to tell", Bounds{Max: f(0.01)}, 0.010001, nil, false, "0.010001 > max 0.01"},
		{"over min", Bounds{Min: f(0.99)}, 0.995, nil, true, "0.995 >= min 0.99"},
		{"under min", Bounds{Min: f(0.99)}, 0.9, nil, false, "0.9 < min 0.99"},
		{"between", Bounds{Min: f(100), Max: f(250)}, 180, nil, true, "180 <= max 250 and >= min 100"},
		{"both, over", Bounds{Min: f(100), Max: f(250)}, 1234567, nil, false, "1.235e+06 > max 250"},
		{"both, under", Bounds{Min: f(100), Max: f(250)}, 3, nil, false, "3 < min 100"},
		{"tolerance ignored without control", Bounds{Max: f(0.01), Tolerance: 1}, 0.5, nil, false, "0.5 > max 0.01"},
		// relative to the rest
		{"over rest", Bounds{Max: f(0.01), Tolerance: 0.005}, 0.2, f(0.01), false, "0.2 > rest 0.01 + tolerance 0.005"},
		{"within tolerance", Bounds{Max: f(0.01), Tolerance: 0.005}, 0.012, f(0.01), true, "0.012 <= rest 0.01 + tolerance 0.005"},
		{"absolute max not applied with control", Bounds{Max: f(0.01), Tolerance: 0.005}, 0.3, f(0.3), true, "0.3 <= rest 0.3 + tolerance 0.005"},
		{"no tolerance", Bounds{Max: f(0.01)}, 0.2, f(0.01), false, "0.2 > rest 0.01"},
		{"under rest", Bounds{Min: f(0.99), Tolerance: 0.05}, 0.9, f(0.99), false, "0.9 < rest 0.99 - tolerance 0.05"},
		{"absolute min not applied with control", Bounds{Min: f(0.99), Tolerance: 0.05}, 0.5, f(0.52), true, "0.5 >= rest 0.52 - tolerance 0.05"},
		{"both relative", Bounds{Max: f(1), Min: f(0), Tolerance: 10}, 105, f(100), true, "105 <= rest 100 + tolerance 10 and >= rest 100 - tolerance 10"},
		{"both relative, under", Bounds{Max: f(1), Min: f(0), Tolerance: 10}, 85, f(100), false, "85 < rest 100 - tolerance 10"},
		// what cannot be judged fails
		{"no bounds", Bounds{}, 0, nil, false, "the check has neither max nor min"},
		{"NaN value", Bounds{Max: f(1)}, math.NaN(), nil, false, "the value NaN is not a number"},
		{"infinite control", Bounds{Max: f(1)}, 0, f(math.Inf(1)), false, "the rest's value +Inf is not a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pass, why := Judge(tc.b, tc.value, tc.control)
			if pass != tc.pass || why != tc.why {
				t.Errorf("got %v %q, want %v %q", pass, why, tc.pass, tc.why)
			}
		})
	}
}
