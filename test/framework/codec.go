package framework

import (
	"github.com/configward/configward/internal/scheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

func serializerFor() runtime.Decoder {
	return serializer.NewCodecFactory(scheme.Scheme()).UniversalDeserializer()
}
