package framework

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/configward/configward/internal/manager"
)

func serializerFor() runtime.Decoder {
	return serializer.NewCodecFactory(manager.Scheme()).UniversalDeserializer()
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }
