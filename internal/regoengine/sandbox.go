package regoengine

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// DefaultCustomRuleBudget is the time one request gives the custom rules,
// all of them together, when Compile is not told otherwise.
//
// Why 100ms: the built-in rules take well under a millisecond per request,
// and a sensible custom rule (a few comparisons over the object and its
// references) takes about as long, so 100ms leaves two orders of magnitude
// of headroom for an honest rule. Yet it caps what a runaway rule adds to
// every workload write at a tenth of a second, a fiftieth of the webhook's
// default 5s timeout (webhooks.timeoutSeconds): the validating webhook fails
// closed, so a rule that made requests time out would block every workload
// write in the namespaces it selects.
const DefaultCustomRuleBudget = 100 * time.Millisecond

// SandboxErrorCode is the code of the compile error (an *ast.Error) for a
// custom module that calls a built-in the sandbox leaves out; its message
// names the built-in and says why.
const SandboxErrorCode = "rego_sandbox_error"

// sandboxReason is why a built-in is left out; see sandboxed.
const sandboxReason = "which ConfigPolicy rules may not use: network, runtime and non-deterministic built-ins are not available (rules must decide from their input alone)"

// deniedBuiltins are left out of the sandbox by name, whatever OPA's
// Nondeterministic flag says: they reach out of the process (the network,
// the OPA runtime's configuration and environment).
var deniedBuiltins = []string{"http.send", "net.lookup_ip_addr", "opa.runtime"}

// Sandboxed reports whether the sandbox leaves the built-in out.
func Sandboxed(name string) bool {
	_, ok := capabilities().denied[name]
	return ok
}

// SandboxedBuiltins lists, sorted, the built-ins the sandbox leaves out:
// deniedBuiltins and every built-in OPA marks Nondeterministic. With OPA
// v1.22 these are http.send, io.jwt.decode_verify, io.jwt.encode_sign,
// io.jwt.encode_sign_raw, json.match_schema and json.verify_schema (they
// may fetch remote schemas), net.lookup_ip_addr, opa.runtime, rand.intn,
// time.now_ns and uuid.rfc4122.
func SandboxedBuiltins() []string {
	var out []string
	for name := range capabilities().denied {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

type sandbox struct {
	caps   *ast.Capabilities
	denied map[string]struct{}
}

// capabilities are OPA's for this version without the sandboxed built-ins.
// Every module compiles with them, the built-in ones included (they call
// none of them), so the one compilation of a set serves every query. A
// module calling a left-out built-in then fails to compile ("undefined
// function"), and at evaluation there is nothing to call.
var capabilities = sync.OnceValue(func() sandbox {
	caps := ast.CapabilitiesForThisVersion()
	s := sandbox{caps: caps, denied: map[string]struct{}{}}
	for _, name := range deniedBuiltins {
		s.denied[name] = struct{}{}
	}
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		if b.Nondeterministic {
			s.denied[b.Name] = struct{}{}
		}
		_, ok := s.denied[b.Name]
		return ok
	})
	return s
})

// explainSandbox rewrites the compiler's "undefined function" errors for
// sandboxed built-ins into errors that say why they are not there. The
// compiler has resolved imports and the module's own functions by then, so
// only calls of the built-in itself are reported.
func explainSandbox(errs ast.Errors) ast.Errors {
	for _, e := range errs {
		if e.Code != ast.TypeErr {
			continue
		}
		name, ok := strings.CutPrefix(e.Message, "undefined function ")
		if ok && Sandboxed(name) {
			e.Code = SandboxErrorCode
			e.Message = "calls " + name + ", " + sandboxReason
		}
	}
	return errs
}

// SandboxViolations splits a Compile error into the calls of sandboxed
// built-ins (each with the file and line of the call) and the rest (nil
// when there is none), so a caller can report each violation against the
// module it is in.
func SandboxViolations(err error) (violations []*ast.Error, rest error) {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return nil, err
	}
	var others ast.Errors
	for _, e := range errs {
		if e.Code == SandboxErrorCode {
			violations = append(violations, e)
		} else {
			others = append(others, e)
		}
	}
	if len(others) == 0 {
		return violations, nil
	}
	if len(violations) == 0 {
		return nil, err
	}
	return violations, others
}
