// Command gitopshealth judges objects the way GitOps tools do, for the
// chart's Argo CD health checks and configward's conditions:
//
//	gitopshealth CHECK.lua < objects.json
//
// objects.json is a JSON array of objects. For each it prints one JSON
// line: kstatus' status and message (sigs.k8s.io/cli-utils' own
// computation, which Flux and Helm's wait use), and what the Lua health
// check returns when Argo CD runs it with the object as obj.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Name          string `json:"name"`
	KStatus       string `json:"kstatus"`
	KStatusReason string `json:"kstatusMessage"`
	Argo          string `json:"argo"`
	ArgoMessage   string `json:"argoMessage"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gitopshealth:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: gitopshealth CHECK.lua < objects.json")
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		return err
	}
	var objs []json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&objs); err != nil {
		return fmt.Errorf("reading the objects: %w", err)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, raw := range objs {
		// As the API server's clients decode it: integers stay integers.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("reading an object: %w", err)
		}
		res, err := status.Compute(u)
		if err != nil {
			return fmt.Errorf("kstatus of %s: %w", u.GetName(), err)
		}
		health, message, err := argo(string(script), u.Object)
		if err != nil {
			return fmt.Errorf("the Lua check of %s: %w", u.GetName(), err)
		}
		if err := enc.Encode(verdict{Name: u.GetName(), KStatus: res.Status.String(), KStatusReason: res.Message, Argo: health, ArgoMessage: message}); err != nil {
			return err
		}
	}
	return nil
}

// argo runs a health check as Argo CD does: the object as the global obj,
// only the base, table, string, math and os libraries open (as in Argo
// CD's sandbox), and a table {status, message} returned.
func argo(script string, obj map[string]any) (string, string, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}, {lua.OsLibName, lua.OpenOs}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return "", "", err
	}
	t, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the check returned %s, not a table", L.Get(-1).Type())
	}
	return lua.LVAsString(t.RawGetString("status")), lua.LVAsString(t.RawGetString("message")), nil
}

// toLua converts decoded JSON to Lua values, as Argo CD hands an object to
// its checks: objects and arrays as tables (arrays from 1).
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	}
	return lua.LNil
}
