package franzgo

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"kconform/clients/go/internal/driver"
)

// ScramMechanism is franz-go's SCRAM client for the run's user (pkg/sasl/scram).
func ScramMechanism(s driver.Security) sasl.Mechanism {
	auth := scram.Auth{User: s.Username, Pass: s.Password}
	if s.Mechanism == "SCRAM-SHA-256" {
		return auth.AsSha256Mechanism()
	}
	return auth.AsSha512Mechanism()
}

// securityOpts: the options every client of the driver starts with on a run over SASL.
func securityOpts() []kgo.Opt {
	if !driver.RunSecurity.SASL() {
		return nil
	}
	opts := []kgo.Opt{kgo.SASL(ScramMechanism(driver.RunSecurity))}
	if driver.RunSecurity.TLS() {
		opts = append(opts, kgo.DialTLSConfig(driver.RunSecurity.TLSConfig()))
	}
	return opts
}
