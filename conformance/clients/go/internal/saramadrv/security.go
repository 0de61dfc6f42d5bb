package saramadrv

import (
	"context"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sasl"

	"kconform/clients/go/internal/driver"
	"kconform/clients/go/internal/franzgo"
)

// scramClient is Sarama's SCRAMClient over franz-go's SCRAM implementation (Sarama ships none;
// its docs point at xdg-go/scram, which go.mod does not have, while franz-go's is in the module
// already). Sarama calls Begin, Step("") for the client-first message, then Step with each
// server message until Done.
type scramClient struct {
	security driver.Security
	session  sasl.Session
	done     bool
}

func (c *scramClient) Begin(user, password, authzID string) error {
	c.security.Username, c.security.Password = user, password
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) {
	if c.session == nil {
		session, first, err := franzgo.ScramMechanism(c.security).Authenticate(context.Background(), "")
		if err != nil {
			return "", err
		}
		c.session = session
		return string(first), nil
	}
	done, response, err := c.session.Challenge([]byte(challenge))
	c.done = done
	return string(response), err
}

func (c *scramClient) Done() bool { return c.done }

// applySecurity sets the run's TLS (the run's CAs) and SASL settings (SaslHandshake v1, then
// SaslAuthenticate with PLAIN or SCRAM).
func applySecurity(conf *sarama.Config) {
	s := driver.RunSecurity
	if s.TLS() {
		conf.Net.TLS.Enable = true
		conf.Net.TLS.Config = s.TLSConfig()
	}
	if !s.SASL() {
		return
	}
	conf.Net.SASL.Enable = true
	conf.Net.SASL.Handshake = true
	conf.Net.SASL.Version = sarama.SASLHandshakeV1
	conf.Net.SASL.User, conf.Net.SASL.Password = s.Username, s.Password
	if s.Mechanism == "PLAIN" {
		conf.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		return
	}
	conf.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
	if s.Mechanism == "SCRAM-SHA-256" {
		conf.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
	}
	conf.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{security: s} }
}
