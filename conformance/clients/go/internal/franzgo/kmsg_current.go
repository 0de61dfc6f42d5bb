//go:build !franzgo_pre_1_22

package franzgo

import "github.com/twmb/franz-go/pkg/kmsg"

// txnOffsetCommitHasTopicIDs: kmsg v1.14+ (franz-go v1.22+) has TxnOffsetCommit v6, which names
// topics by id (KIP-1319). A build against an older release (tag franzgo_pre_1_22, passed by
// conformance/clients/go_build.py for franz-go@VERSION) uses kmsg_pre_1_22.go instead.
const txnOffsetCommitHasTopicIDs = true

func setTxnOffsetCommitTopicID(t *kmsg.TxnOffsetCommitRequestTopic, id [16]byte) { t.TopicID = id }
