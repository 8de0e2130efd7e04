package reload

import (
	"encoding/json"
	"fmt"
)

// SpecEnv is the environment variable the injection hands the agent its
// Spec in, as JSON.
const SpecEnv = "CONFIGWARD_AGENT"

// Spec is what the injection tells the agent.
type Spec struct {
	// Trigger and Check are the pod's annotations, as written.
	Trigger string `json:"trigger"`
	Check   string `json:"check,omitempty"`
	// Report is the URL of configward's report endpoint; CA the PEM of the
	// authority its serving certificate chains to.
	Report string `json:"report"`
	CA     string `json:"ca,omitempty"`
	// ServerName, when set, is the name the endpoint's certificate is
	// checked against, where Report names it by address (a cluster
	// without DNS for Services).
	ServerName string `json:"serverName,omitempty"`
	// TokenFile is the projected service-account token the agent reports
	// with (audience Audience).
	TokenFile string `json:"tokenFile"`
	// Configs are the hot ConfigMaps and Secrets the pod mounts as
	// directories, where the agent sees them.
	Configs []Config `json:"configs"`
	// Certificates are the ports whose served certificate the agent
	// checks (v1alpha1.ServingCertAnnotation), each with its Secret and
	// where the agent finds its certificate.
	Certificates []ServingCert `json:"certificates,omitempty"`
}

// PodIPEnv holds the pod's address (the downward API's status.podIP): the
// agent dials a port there when nothing answers on localhost.
const PodIPEnv = "CONFIGWARD_POD_IP"

// Config is one hot ConfigMap or Secret a pod mounts.
type Config struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Dir is where the agent finds the volume (mounted read-only).
	Dir string `json:"dir"`
	// Items maps the files of the volume to the keys they hold, where the
	// volume projects some keys (items); nil: each file is the key of its
	// name.
	Items map[string]string `json:"items,omitempty"`
}

// ID names the config in reports: "ConfigMap/flags".
func (c Config) ID() string { return c.Kind + "/" + c.Name }

// ContainerEnv marks the processes of the container a signal goes to: the
// injection sets it on that container, and the agent, sharing the pod's
// process namespace, finds them by it.
const ContainerEnv = "CONFIGWARD_RELOAD_CONTAINER"

// Audience is the audience of the agent's token: configward accepts no
// other, so a token the pod uses elsewhere cannot report.
const Audience = "configward.dev/reload-agent"

// ParseSpec reads a Spec and checks it.
func ParseSpec(v string) (Spec, error) {
	var s Spec
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return s, fmt.Errorf("%s is not an agent spec: %w", SpecEnv, err)
	}
	if s.Trigger != "" || len(s.Certificates) == 0 {
		// An agent injected for the certificate check alone has no
		// program to reload.
		if _, err := ParseTrigger(s.Trigger); err != nil {
			return s, err
		}
	}
	if s.Check != "" {
		if _, err := ParseCheck(s.Check); err != nil {
			return s, err
		}
	}
	if s.Report == "" || s.TokenFile == "" {
		return s, fmt.Errorf("%s names no report URL or token file", SpecEnv)
	}
	return s, nil
}
