//go:build !sarama_pre_1_60_1

package saramadrv

import "github.com/IBM/sarama"

// cooperativeSticky: Sarama's cooperative-sticky strategy (KIP-429), new in 1.60.1. A build
// against an older release (tag sarama_pre_1_60_1, passed by conformance/clients/go_build.py for
// sarama@VERSION) uses sarama_cooperative_pre_1_60_1.go, where the strategy is missing and asking
// for it answers UNSUPPORTED_BY_CLIENT.
var cooperativeSticky = sarama.NewBalanceStrategyCooperativeSticky
