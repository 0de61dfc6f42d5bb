package driver

import (
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// Client is a library behind the protocol: one method per op of the definition (ops.yaml).
// hello is the loop's own; Library.Ops maps the names with OpsOf.
type Client interface {
	CreateProducer(Args, Deadline) (map[string]any, error)
	CreateConsumer(Args, Deadline) (map[string]any, error)
	CreateAdmin(Args, Deadline) (map[string]any, error)
	InitTransactions(Args, Deadline) (map[string]any, error)
	BeginTransaction(Args, Deadline) (map[string]any, error)
	Send(Args, Deadline) (map[string]any, error)
	Flush(Args, Deadline) (map[string]any, error)
	SendOffsetsToTransaction(Args, Deadline) (map[string]any, error)
	CommitTransaction(Args, Deadline) (map[string]any, error)
	AbortTransaction(Args, Deadline) (map[string]any, error)
	Subscribe(Args, Deadline) (map[string]any, error)
	Assign(Args, Deadline) (map[string]any, error)
	Poll(Args, Deadline) (map[string]any, error)
	Commit(Args, Deadline) (map[string]any, error)
	Committed(Args, Deadline) (map[string]any, error)
	Position(Args, Deadline) (map[string]any, error)
	Close(Args, Deadline) (map[string]any, error)
	DescribeTransactions(Args, Deadline) (map[string]any, error)
	DescribeProducers(Args, Deadline) (map[string]any, error)
	ListOffsets(Args, Deadline) (map[string]any, error)
	CreateTopics(Args, Deadline) (map[string]any, error)
}

// OpsOf maps the protocol's op names onto a Client's methods.
func OpsOf(c Client) map[string]Op {
	return map[string]Op{
		"create_producer": c.CreateProducer, "create_consumer": c.CreateConsumer, "create_admin": c.CreateAdmin,
		"init_transactions": c.InitTransactions, "begin_transaction": c.BeginTransaction, "send": c.Send,
		"flush": c.Flush, "send_offsets_to_transaction": c.SendOffsetsToTransaction,
		"commit_transaction": c.CommitTransaction, "abort_transaction": c.AbortTransaction,
		"subscribe": c.Subscribe, "assign": c.Assign, "poll": c.Poll, "commit": c.Commit,
		"committed": c.Committed, "position": c.Position, "close": c.Close,
		"describe_transactions": c.DescribeTransactions, "describe_producers": c.DescribeProducers,
		"list_offsets": c.ListOffsets,
		"create_topics": c.CreateTopics,
	}
}

// ProducerOps are the ops whose failure is classified with the producer's transaction state.
var ProducerOps = map[string]bool{"init_transactions": true, "begin_transaction": true, "send": true,
	"flush": true, "send_offsets_to_transaction": true, "commit_transaction": true, "abort_transaction": true}

// ModuleVersion is the version of a Go module linked into the binary (go.mod pins it).
func ModuleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}

// Hello is hello's library part for a Go module's client.
func Hello(client, module string) map[string]any {
	v := strings.TrimPrefix(ModuleVersion(module), "v")
	return map[string]any{"client": client, "library": client, "library_version": v, "client_version": v}
}

// The driver-decided answers every driver gives alike.
func NoProducer() error { return Fail("ILLEGAL_STATE", "no producer: call create_producer first") }
func NoConsumer() error { return Fail("ILLEGAL_STATE", "no consumer: call create_consumer first") }
func AlreadyHas(kind string) error {
	return Fail("ILLEGAL_STATE", "this driver already has a %s; start another driver", kind)
}
func NoAdminBootstrap() error {
	return Fail("ILLEGAL_STATE", "create_admin needs config with bootstrap.servers")
}
func NotAssigned(tp TopicPartition) error {
	return Fail("ILLEGAL_STATE", "no position for %s-%d: not assigned", tp.Topic, tp.Partition)
}

// Closes says whether close's `which` covers kind (producer, consumer, admin).
func Closes(a Args, kind string) bool {
	which := a.StrOr("which", "all")
	return which == kind || which == "all"
}

// OffsetsGroup is the group send_offsets_to_transaction commits for: the consumer's (consumerGroup,
// when the driver has a consumer with a group.id), else the op's group_id.
func OffsetsGroup(consumerGroup string, a Args) (string, error) {
	switch {
	case consumerGroup != "":
		return consumerGroup, nil
	case a.Str("group_id") != "":
		return a.Str("group_id"), nil
	}
	return "", Fail("ILLEGAL_STATE", "send_offsets_to_transaction needs a consumer or a group_id")
}

// PollWindow reads poll's max_records and timeout_ms: the window ends at the timeout or the
// op's deadline, whichever is first.
func PollWindow(a Args, dl Deadline) (int, Deadline, error) {
	max, err := a.Int("max_records", 500)
	if err != nil {
		return 0, Deadline{}, err
	}
	timeout, err := a.Int("timeout_ms", 1000)
	if err != nil {
		return 0, Deadline{}, err
	}
	return int(max), dl.Within(time.Duration(timeout) * time.Millisecond), nil
}

// Polled is poll's answer.
func Polled(records, errs []any) map[string]any {
	data := map[string]any{"records": records}
	if len(errs) > 0 {
		data["errors"] = errs
	}
	return data
}

// PartitionRows lists topic -> partitions as [{topic, partition}] in order.
func PartitionRows(parts map[string][]int32) []map[string]any {
	rows := []map[string]any{}
	topics := make([]string, 0, len(parts))
	for t := range parts {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		ps := append([]int32{}, parts[t]...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			rows = append(rows, map[string]any{"topic": t, "partition": p})
		}
	}
	return rows
}

// ProducerRow is one active producer as describe_producers answers it (ops.yaml): Kafka's
// DescribeProducers fields, -1 for "none".
func ProducerRow(id int64, epoch, lastSequence int32, lastTimestamp int64, coordinatorEpoch int32,
	txnStart int64) map[string]any {
	return map[string]any{"producer_id": id, "producer_epoch": epoch, "last_sequence": lastSequence,
		"last_timestamp_ms": lastTimestamp, "coordinator_epoch": coordinatorEpoch,
		"current_txn_start_offset": txnStart}
}

// Topics are the distinct topics of some partitions.
func Topics(parts []TopicPartition) []string {
	seen := map[string]bool{}
	var out []string
	for _, tp := range parts {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			out = append(out, tp.Topic)
		}
	}
	return out
}

// NewTopic is one topic of create_topics.
type NewTopic struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]*string
}

// NewTopics reads create_topics' topics.
func NewTopics(a Args) ([]NewTopic, error) {
	items, err := a.Objects("topics")
	if err != nil {
		return nil, err
	}
	out := make([]NewTopic, 0, len(items))
	for _, t := range items {
		parts, err := t.Int("partitions", 1)
		if err != nil {
			return nil, err
		}
		rf, err := t.Int("replication_factor", 1)
		if err != nil {
			return nil, err
		}
		configs := map[string]*string{}
		for k, v := range t.Object("config") {
			s := fmt.Sprint(v)
			configs[k] = &s
		}
		out = append(out, NewTopic{Name: t.Str("name"), Partitions: int32(parts), ReplicationFactor: int16(rf), Configs: configs})
	}
	return out, nil
}

// TopicResult is one row of create_topics' answer.
func TopicResult(name string, err error, normalise func(error, string) ErrorInfo) map[string]any {
	if err != nil {
		return map[string]any{"name": name, "error": normalise(err, "create_topics")}
	}
	return map[string]any{"name": name, "error": nil}
}

// ReadRetryPause is the pause between two tries of an admin read.
const ReadRetryPause = 200 * time.Millisecond

// RetryRead runs an admin read (list_offsets) again while it fails in a way worth retrying and
// the deadline leaves room, as Java's Admin retries retriable errors until its timeout: the
// observer reads offsets right after a broker was killed, when a client's metadata still names
// the dead node.
func RetryRead(dl Deadline, read func() (retry bool)) {
	for read() && dl.Remaining() > 2*ReadRetryPause {
		time.Sleep(ReadRetryPause)
	}
}
