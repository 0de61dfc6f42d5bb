//go:build franzgo_pre_1_22

package franzgo

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"
)

// serverSideBalancer: franz-go before v1.22 has no KIP-848 consumer (see kip848_current.go).
func serverSideBalancer() (kgo.GroupOpt, error) {
	return nil, errors.New("franz-go before 1.22 has no KIP-848 consumer (kgo.ServerSideBalancer)")
}
