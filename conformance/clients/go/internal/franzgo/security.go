package franzgo

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
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

// securityOpts: the options every client of the driver starts with on a secured run.
func securityOpts() []kgo.Opt {
	s := driver.RunSecurity
	var opts []kgo.Opt
	if s.SASL() && s.Mechanism == "PLAIN" {
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	} else if s.SASL() {
		opts = append(opts, kgo.SASL(ScramMechanism(s)))
	}
	if s.TLS() {
		opts = append(opts, kgo.DialTLSConfig(driver.RunSecurity.TLSConfig()))
	}
	return opts
}
