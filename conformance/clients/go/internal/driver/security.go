package driver

import (
	"encoding/json"
	"fmt"
	"os"
)

// SecurityEnv is the environment variable the runner gives every driver process the run's
// security settings in (conformance/security.py): JSON, absent on a PLAINTEXT run.
const SecurityEnv = "KCONFORM_CLIENT_SECURITY"

// Security is the run's security protocol and the user its clients authenticate as.
type Security struct {
	Protocol  string `json:"protocol"`
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	Password  string `json:"password"`
}

// SASL reports whether clients must authenticate (SASL_PLAINTEXT or SASL_SSL).
func (s Security) SASL() bool { return s.Protocol == "SASL_PLAINTEXT" || s.Protocol == "SASL_SSL" }

// RunSecurity is what this process was started with (the zero value on a PLAINTEXT run).
var RunSecurity = mustSecurity()

func mustSecurity() Security {
	var s Security
	raw := os.Getenv(SecurityEnv)
	if raw == "" {
		return s
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintf(os.Stderr, "%s is not JSON: %v\n", SecurityEnv, err)
		os.Exit(2)
	}
	if s.Protocol != "SASL_PLAINTEXT" {
		fmt.Fprintf(os.Stderr, "%s: security protocol %q is not supported by this driver\n", SecurityEnv, s.Protocol)
		os.Exit(2)
	}
	if s.Mechanism != "SCRAM-SHA-256" && s.Mechanism != "SCRAM-SHA-512" {
		fmt.Fprintf(os.Stderr, "%s: SASL mechanism %q is not supported by this driver\n", SecurityEnv, s.Mechanism)
		os.Exit(2)
	}
	return s
}
