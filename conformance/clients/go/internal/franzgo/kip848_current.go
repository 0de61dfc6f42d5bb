//go:build !franzgo_pre_1_22

package franzgo

import "github.com/twmb/franz-go/pkg/kgo"

// serverSideBalancer: franz-go v1.22+ joins KIP-848 consumer groups with ServerSideBalancer
// (group.protocol=consumer). A build against an older release (tag franzgo_pre_1_22, passed by
// conformance/clients/go_build.py for franz-go@VERSION) uses kip848_pre_1_22.go instead.
func serverSideBalancer() (kgo.GroupOpt, error) { return kgo.ServerSideBalancer(), nil }
