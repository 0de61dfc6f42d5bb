//go:build sarama_pre_1_60_1

package saramadrv

import "github.com/IBM/sarama"

// cooperativeSticky: Sarama before 1.60.1 has no cooperative-sticky strategy (see sarama_cooperative.go).
var cooperativeSticky func() sarama.BalanceStrategy
