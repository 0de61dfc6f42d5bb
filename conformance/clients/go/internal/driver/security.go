package driver

import (
	"crypto/tls"
	"crypto/x509"
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
	// CAFile is the run's CAs (PEM) on a run over TLS (SSL, SASL_SSL): the only ones trusted;
	// empty: the system's.
	CAFile string `json:"ca_file"`
}

// SASL reports whether clients must authenticate (SASL_PLAINTEXT or SASL_SSL).
func (s Security) SASL() bool { return s.Protocol == "SASL_PLAINTEXT" || s.Protocol == "SASL_SSL" }

// TLS reports whether connections speak TLS (SSL or SASL_SSL).
func (s Security) TLS() bool { return s.Protocol == "SSL" || s.Protocol == "SASL_SSL" }

// TLSConfig trusts the run's CAs only (nil RootCAs: the system's); Go's TLS dial verifies the
// host (or IP) it dialled.
func (s Security) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: runCAs, MinVersion: tls.VersionTLS12}
}

var runCAs *x509.CertPool

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
	if !s.SASL() && !s.TLS() {
		fmt.Fprintf(os.Stderr, "%s: security protocol %q is not supported by this driver\n", SecurityEnv, s.Protocol)
		os.Exit(2)
	}
	if s.SASL() && s.Mechanism != "PLAIN" && s.Mechanism != "SCRAM-SHA-256" && s.Mechanism != "SCRAM-SHA-512" {
		fmt.Fprintf(os.Stderr, "%s: SASL mechanism %q is not supported by this driver\n", SecurityEnv, s.Mechanism)
		os.Exit(2)
	}
	if s.TLS() && s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: the run's CA: %v\n", SecurityEnv, err)
			os.Exit(2)
		}
		runCAs = x509.NewCertPool()
		if !runCAs.AppendCertsFromPEM(pem) {
			fmt.Fprintf(os.Stderr, "%s: no certificate in %s\n", SecurityEnv, s.CAFile)
			os.Exit(2)
		}
	}
	return s
}
