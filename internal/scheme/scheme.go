// Package scheme holds the one runtime.Scheme of every type configward
// reads or writes: Kubernetes' built-in types, configward's CRDs and the OpenReports types
// the controller writes. It is
// its own package so that the offline `configward check` can decode
// manifests without linking the webhook server or the controllers.
package scheme

import (
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/configward/configward/internal/api/v1alpha1"
)

// Scheme returns a new scheme with every type configward uses.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // only fails on a programming error in the scheme builders
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	// OpenReports, which the controller writes when their CRD is served.
	if err := openreports.Install(s); err != nil {
		panic(err)
	}
	return s
}
