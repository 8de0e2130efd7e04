package framework

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/configward/configward/internal/manager"
)

func serializerFor() runtime.Decoder {
	return serializer.NewCodecFactory(manager.Scheme()).UniversalDeserializer()
}
