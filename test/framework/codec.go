package framework

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/configward/configward/internal/scheme"
)

func serializerFor() runtime.Decoder {
	return serializer.NewCodecFactory(scheme.Scheme()).UniversalDeserializer()
}
