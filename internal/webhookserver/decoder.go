package webhookserver

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Decoder decodes the objects of a review the way the review itself is
// decoded: once, case-sensitively, into the type the handler asks for.
// controller-runtime's decoder parses each object twice. Like it, an object
// must say what it is, and be of the type asked for: the API server sends
// the object in the request's kind, so anything else is not from it.
type Decoder struct {
	// Scheme knows the Go type of every kind the handlers decode.
	Scheme *runtime.Scheme
	// FullObjects decodes every field of the objects decoded in one pass
	// with their review, where they are slim otherwise (see slimobject):
	// the tests that hold the handlers' answers equal both ways set it.
	FullObjects bool
}

var _ admission.Decoder = Decoder{}

// Decode decodes the request's object.
func (d Decoder) Decode(req admission.Request, into runtime.Object) error {
	return d.DecodeRaw(req.Object, into)
}

// DecodeRaw decodes raw into into. An object already decoded with its
// review (raw.Object, of into's type) is copied.
func (d Decoder) DecodeRaw(raw runtime.RawExtension, into runtime.Object) error {
	if len(raw.Raw) == 0 && raw.Object != nil {
		src, dst := reflect.ValueOf(raw.Object), reflect.ValueOf(into)
		if src.Type() != dst.Type() || dst.Kind() != reflect.Pointer {
			return fmt.Errorf("unable to decode %s into %v", raw.Object.GetObjectKind().GroupVersionKind(), reflect.TypeOf(into))
		}
		dst.Elem().Set(src.Elem())
		return nil
	}
	if len(raw.Raw) == 0 {
		return errors.New("there is no content to decode")
	}
	if u, ok := into.(runtime.Unstructured); ok {
		var content map[string]any
		if err := utiljson.Unmarshal(raw.Raw, &content); err != nil {
			return err
		}
		u.SetUnstructuredContent(content)
		return nil
	}
	if err := utiljson.Unmarshal(raw.Raw, into); err != nil {
		return err
	}
	got := into.GetObjectKind().GroupVersionKind()
	if got.Kind == "" {
		// Never quote the object: it may be a Secret.
		return errors.New("the object's kind is missing")
	}
	want, _, err := d.Scheme.ObjectKinds(into)
	if err != nil {
		return err
	}
	if !slices.Contains(want, got) {
		return fmt.Errorf("unable to decode %s into %v", got, reflect.TypeOf(into))
	}
	return nil
}

// present reports whether a review carries the object.
func present(o runtime.RawExtension) bool { return len(o.Raw) > 0 || o.Object != nil }

// ErrNoBytes is RawJSON's error for an object decoded in one pass with its
// review: its bytes are not kept, and it lacks what no built-in rule reads
// (see slimobject), so it cannot stand for what the API server sent.
var ErrNoBytes = errors.New("the object was read without the fields configward's built-in rules do not need, " +
	"before custom rules that read whole objects came into force; send the request again")

// RawJSON is the object as JSON, its bytes as received (only custom rules
// read them; while they are in force, objects keep their bytes, see
// Intake.KeepBytes). An object decoded in one pass has none: ErrNoBytes.
func RawJSON(o runtime.RawExtension) ([]byte, error) {
	if len(o.Raw) == 0 && o.Object != nil {
		return nil, ErrNoBytes
	}
	return o.Raw, nil
}
