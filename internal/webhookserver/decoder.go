package webhookserver

import (
	"encoding/json"
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

// RawJSON is the object as JSON: its bytes as received, or, for an object
// decoded in one pass with its review, the object encoded again (only
// custom rules read it).
func RawJSON(o runtime.RawExtension) ([]byte, error) {
	if len(o.Raw) > 0 || o.Object == nil {
		return o.Raw, nil
	}
	return json.Marshal(o.Object)
}
