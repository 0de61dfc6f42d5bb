//go:build franzgo_pre_1_22

package franzgo

import "github.com/twmb/franz-go/pkg/kmsg"

// txnOffsetCommitHasTopicIDs: the kmsg of franz-go < v1.22 stops at TxnOffsetCommit v5, whose
// topics are named by name only (see kmsg_current.go).
const txnOffsetCommitHasTopicIDs = false

func setTxnOffsetCommitTopicID(*kmsg.TxnOffsetCommitRequestTopic, [16]byte) {}
