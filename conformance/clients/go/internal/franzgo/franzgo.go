// Package franzgo is kconform's driver for franz-go (github.com/twmb/franz-go, pinned in go.mod):
// one producer kgo.Client, one consumer kgo.Client and a kadm admin behind the driver protocol.
//
// How the ops map onto franz-go, as an application uses it:
//
//   - init_transactions is Client.ProducerID: franz-go loads its producer id lazily (InitProducerId
//     on first need); ProducerID is the public call that loads it now, as Java's initTransactions.
//   - begin_transaction is Client.BeginTransaction; commit_transaction is Flush + EndTransaction
//     (TryCommit), abort_transaction AbortBufferedRecords + EndTransaction(TryAbort): franz-go's
//     EndTransaction documents that the caller flushes (or aborts buffered records) first, and its
//     GroupTransactSession.End does exactly that. GroupTransactSession itself is not used: it fuses
//     poll, send-offsets and end into one call, and the protocol's ops are separate steps.
//   - The TV2 decision (KIP-890 part 2) is franz-go's own: BeginTransaction opts in when the
//     cluster's finalized transaction.version is >= 2 (Produce v12 without AddPartitionsToTxn,
//     EndTxn v5), as Java does.
//   - send_offsets_to_transaction: franz-go commits offsets in a transaction only for its own
//     group consumer living in the same client (GroupTransactSession / EndTransaction with a
//     ConsumerGroup client); it has no call taking explicit offsets, and the protocol's consumer is
//     a client of its own whose partitions the cases assign. So the driver sends what franz-go would
//     send, through the producer client's own Request (franz-go's coordinator lookup, retries and
//     version negotiation): AddOffsetsToTxn unless the producer runs TV2 (as franz-go), then
//     TxnOffsetCommit with the producer's id/epoch (ProducerID) and the consumer's group metadata
//     -- Client.GroupMetadata(): member id and generation (KIP-447); an assigned consumer has none
//     (""/-1), as Java's assign-mode groupMetadata(). Differences from franz-go's own path: the
//     TxnOffsetCommit version is the highest both sides speak (franz-go pins <= v4 under TV1), and a
//     failed AddOffsetsToTxn does not fail the producer id (franz-go's private failProducerID).
//   - A consumer is a direct (assign) consumer, or a group consumer built at subscribe. franz-go
//     has no position(): it is tracked from the records polled, with KeepControlRecords so that
//     transaction markers (which franz-go never hands out otherwise) move it past the end as Java's
//     position does; the markers themselves are not returned. assign without an offset starts at
//     the group's committed offset (kadm OffsetFetch), else at auto.offset.reset (kadm ListOffsets),
//     as Java's consumer does.
//
// Classification -- franz-go's own notions, read from v1.22.2's source:
//
//   - retriable: kerr.IsRetriable (the Kafka error's Retriable flag, what franz-go retries).
//   - fenced: the error is kerr.ProducerFenced.
//   - abortable / fatal: franz-go has no such flags on errors; its transactional state is the
//     producer id's stored error (failProducerID), which BeginTransaction and EndTransaction(TryAbort)
//     test in maybeRecoverProducerID: recoverable -> abort (or begin) goes on with a reloaded id;
//     unrecoverable -> "producer ID has a fatal, unrecoverable error". The driver reads that stored
//     error after the failure (by reflection, as the Java driver reads its TransactionManager;
//     state_read says whether it could) and applies maybeRecoverProducerID's rule: a transport or
//     retriable error, or an id marked for reload, is recoverable; under TV2 only
//     UNKNOWN_PRODUCER_ID and TRANSACTION_ABORTABLE are; under TV1 UNKNOWN_PRODUCER_ID /
//     INVALID_PRODUCER_ID_MAPPING (InitProducerId v3+, KIP-360) and INVALID_PRODUCER_EPOCH (v4+,
//     KIP-588) are. Recoverable -> abortable, else fatal. Errors that franz-go documents as "retry
//     with TryAbort" (OPERATION_NOT_ATTEMPTED, TRANSACTION_ABORTABLE, an unconfirmed EndTxn) are
//     abortable. franz-go fails the producer id before it fails the record's promise, so the
//     state read after a failed send is already settled (no wait as in the Java driver).
package franzgo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kconform/clients/go/internal/driver"
)

// Driver holds at most one producer, one consumer and one admin.
type Driver struct {
	producer     *kgo.Client
	producerCfg  driver.Args // create_producer's config, for eos_loop's session and the producer after it
	txnal        bool
	offsetsAdded bool // AddOffsetsToTxn sent in the current transaction (franz-go: offsetsAddedToTxn)

	consumer      *kgo.Client
	consumerOpts  []kgo.Opt
	group         string
	readCommitted bool
	resetLatest   bool
	grouped       bool // the consumer is a group member (subscribe)
	subscribed    []string
	posMu         sync.Mutex
	positions     map[string]map[int32]int64
	assigned      []driver.TopicPartition

	admin     *kadm.Client
	adminRaw  *kgo.Client
	bootstrap []string

	deliveries driver.Deliveries
}

// New returns an empty driver.
func New() *Driver { return &Driver{} }

// Version is the franz-go module version linked in.
func Version() string { return driver.ModuleVersion("github.com/twmb/franz-go") }

// Hello names the library.
func (d *Driver) Hello() map[string]any {
	hello := driver.Hello("franz-go", "github.com/twmb/franz-go")
	hello["kmsg_version"] = strings.TrimPrefix(driver.ModuleVersion("github.com/twmb/franz-go/pkg/kmsg"), "v")
	return hello
}

// Unsupported: franz-go can do every op of the definition.
func (d *Driver) Unsupported() map[string]string { return map[string]string{} }

// Ops maps the protocol's ops onto the methods below, plus the optional eos_loop (eos_loop.go).
func (d *Driver) Ops() map[string]driver.Op {
	ops := driver.OpsOf(d)
	ops["eos_loop"] = d.EosLoop
	return ops
}

func ctxFor(dl driver.Deadline) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), dl.End)
}

// -- config ----------------------------------------------------------------------------------------

var stderr = os.Stderr

type logger struct{}

func (logger) Level() kgo.LogLevel { return kgo.LogLevelInfo }
func (logger) Log(level kgo.LogLevel, msg string, kv ...any) {
	fmt.Fprintf(stderr, "%s %s %v\n", level, msg, kv)
}

// common maps the keys producers and consumers share.
func (d *Driver) common(cfg driver.Config, opts *[]kgo.Opt) map[string]func(string) error {
	*opts = append(*opts, securityOpts()...) // the run's security (security.go)
	return map[string]func(string) error{
		"bootstrap.servers": func(v string) error {
			servers := driver.Servers(v)
			if len(servers) == 0 {
				return errors.New("no servers")
			}
			d.bootstrap = servers
			*opts = append(*opts, kgo.SeedBrokers(servers...))
			return nil
		},
		"client.id": func(v string) error { *opts = append(*opts, kgo.ClientID(v)); return nil },
		"request.timeout.ms": func(v string) error {
			ms, err := driver.Millis(v)
			if err == nil {
				// Java's request.timeout.ms is the whole client-side wait for a response and the
				// produce request's timeout: franz-go's RequestTimeoutOverhead ("roughly equivalent
				// to request.timeout.ms") and ProduceRequestTimeout.
				*opts = append(*opts, kgo.RequestTimeoutOverhead(time.Duration(ms)*time.Millisecond))
			}
			return err
		},
		"retry.backoff.ms": func(v string) error {
			ms, err := driver.Millis(v)
			*opts = append(*opts, kgo.RetryBackoffFn(func(int) time.Duration { return time.Duration(ms) * time.Millisecond }))
			return err
		},
	}
}

func durationOpt(opts *[]kgo.Opt, make func(time.Duration) kgo.Opt) func(string) error {
	return func(v string) error {
		ms, err := driver.Millis(v)
		if err == nil {
			*opts = append(*opts, make(time.Duration(ms)*time.Millisecond))
		}
		return err
	}
}

func (d *Driver) producerOpts(cfg driver.Config) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.WithLogger(logger{}), kgo.RecordPartitioner(partitioner{})}
	m := d.common(cfg, &opts)
	idempotent := true
	var acks *kgo.Acks
	m["transactional.id"] = func(v string) error {
		d.txnal = true
		opts = append(opts, kgo.TransactionalID(v))
		return nil
	}
	m["transaction.timeout.ms"] = durationOpt(&opts, func(t time.Duration) kgo.Opt { return kgo.TransactionTimeout(t) })
	m["enable.idempotence"] = func(v string) (err error) { idempotent, err = driver.Flag(v); return err }
	m["acks"] = func(v string) error {
		var a kgo.Acks
		switch v {
		case "all", "-1":
			a = kgo.AllISRAcks()
		case "1":
			a = kgo.LeaderAck()
		case "0":
			a = kgo.NoAck()
		default:
			return errors.New("acks must be all, -1, 0 or 1")
		}
		acks = &a
		return nil
	}
	m["retries"] = func(v string) error {
		n, err := strconv.Atoi(v)
		if err == nil {
			opts = append(opts, kgo.RecordRetries(n))
		}
		return err
	}
	m["delivery.timeout.ms"] = durationOpt(&opts, func(t time.Duration) kgo.Opt { return kgo.RecordDeliveryTimeout(t) })
	m["linger.ms"] = durationOpt(&opts, func(t time.Duration) kgo.Opt { return kgo.ProducerLinger(t) })
	m["max.in.flight.requests.per.connection"] = func(v string) error {
		n, err := strconv.Atoi(v)
		if err == nil {
			opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(n))
		}
		return err
	}
	base := m["request.timeout.ms"]
	m["request.timeout.ms"] = func(v string) error {
		if err := base(v); err != nil {
			return err
		}
		ms, _ := driver.Millis(v)
		opts = append(opts, kgo.ProduceRequestTimeout(time.Duration(ms)*time.Millisecond))
		return nil
	}
	if err := cfg.Apply(m); err != nil {
		return nil, err
	}
	if !idempotent {
		if d.txnal {
			return nil, driver.Fail("INVALID_ARGUMENT", "enable.idempotence=false with a transactional.id")
		}
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if acks != nil {
		opts = append(opts, kgo.RequiredAcks(*acks))
	}
	return opts, nil
}

func (d *Driver) consumerConfig(cfg driver.Config) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.WithLogger(logger{}), kgo.KeepControlRecords()}
	m := d.common(cfg, &opts)
	d.resetLatest = true // Java's default auto.offset.reset
	autoCommit := true
	m["group.id"] = func(v string) error { d.group = v; return nil }
	m["isolation.level"] = func(v string) error {
		switch v {
		case "read_committed":
			d.readCommitted = true
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		case "read_uncommitted":
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
		default:
			return errors.New("read_committed or read_uncommitted")
		}
		return nil
	}
	m["auto.offset.reset"] = func(v string) error {
		switch v {
		case "earliest":
			d.resetLatest = false
			opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		case "latest":
			opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
		case "none":
			opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
		default:
			return errors.New("earliest, latest or none")
		}
		return nil
	}
	m["enable.auto.commit"] = func(v string) (err error) { autoCommit, err = driver.Flag(v); return err }
	m["auto.commit.interval.ms"] = durationOpt(&opts, func(t time.Duration) kgo.Opt { return kgo.AutoCommitInterval(t) })
	m["session.timeout.ms"] = durationOpt(&opts, func(t time.Duration) kgo.Opt { return kgo.SessionTimeout(t) })
	m["heartbeat.interval.ms"] = durationOpt(&opts, func(t time.Duration) kgo.Opt { return kgo.HeartbeatInterval(t) })
	m["max.poll.interval.ms"] = durationOpt(&opts, func(t time.Duration) kgo.Opt { return kgo.RebalanceTimeout(t) })
	// Java's assignor classes -> franz-go's balancers of the same protocol name. Unset keeps
	// franz-go's own default, [cooperative-sticky] (Java's is [range, cooperative-sticky]).
	m["partition.assignment.strategy"] = func(v string) error {
		names, err := driver.AssignorNames(v)
		if err != nil {
			return err
		}
		balancers := make([]kgo.GroupBalancer, 0, len(names))
		for _, name := range names {
			balancers = append(balancers, balancerNamed[name]())
		}
		opts = append(opts, kgo.Balancers(balancers...))
		return nil
	}
	// KIP-848 (kconform run --group-protocol consumer): franz-go joins a consumer group when
	// ServerSideBalancer is set and its first balancer is range or (cooperative-)sticky -- its
	// default [cooperative-sticky] asks the broker for "uniform". group.remote.assignor names
	// the broker's assignor as Java's consumer does.
	m["group.protocol"] = func(v string) error {
		switch strings.ToLower(v) {
		case "consumer":
			opt, err := serverSideBalancer()
			if err != nil {
				return err
			}
			opts = append(opts, opt)
		case "classic":
		default:
			return errors.New("classic or consumer")
		}
		return nil
	}
	m["group.remote.assignor"] = func(v string) error {
		switch v {
		case "uniform":
			opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
		case "range":
			opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
		default:
			return errors.New("uniform or range (the broker's assignors franz-go can ask for)")
		}
		return nil
	}
	m["group.instance.id"] = func(v string) error {
		if v == "" {
			return errors.New("an instance id must be non-empty (Java's InvalidConfigurationException)")
		}
		opts = append(opts, kgo.InstanceID(v)) // static membership (KIP-345)
		return nil
	}
	if err := cfg.Apply(m); err != nil {
		return nil, err
	}
	if !autoCommit {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	if d.resetLatest {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	}
	return opts, nil
}

// balancerNamed: franz-go's balancer for each of Java's protocol names (driver.JavaAssignors).
var balancerNamed = map[string]func() kgo.GroupBalancer{
	"range":              kgo.RangeBalancer,
	"roundrobin":         kgo.RoundRobinBalancer,
	"sticky":             kgo.StickyBalancer,
	"cooperative-sticky": kgo.CooperativeStickyBalancer,
}

// groupOnly are the options franz-go accepts only for a group consumer (subscribe).
func isGroupOpt(o kgo.Opt) bool {
	_, ok := o.(kgo.GroupOpt)
	return ok
}

// -- lifecycle -------------------------------------------------------------------------------------

func (d *Driver) CreateProducer(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.producer != nil {
		return nil, driver.AlreadyHas("producer")
	}
	cfg := driver.NewConfig(a.Object("config"))
	opts, err := d.producerOpts(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	d.producer, d.producerCfg = cl, a.Object("config")
	return map[string]any{"client_id": driver.ClientID(cfg)}, nil
}

func (d *Driver) CreateConsumer(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.consumerOpts != nil {
		return nil, driver.AlreadyHas("consumer")
	}
	cfg := driver.NewConfig(a.Object("config"))
	opts, err := d.consumerConfig(cfg)
	if err != nil {
		return nil, err
	}
	// A direct consumer now; subscribe replaces it with a group consumer (franz-go fixes group
	// membership when the client is built).
	cl, err := kgo.NewClient(directOpts(opts)...)
	if err != nil {
		return nil, err
	}
	d.consumer, d.consumerOpts = cl, opts
	d.positions = map[string]map[int32]int64{}
	return map[string]any{"client_id": driver.ClientID(cfg)}, nil
}

func directOpts(opts []kgo.Opt) []kgo.Opt {
	out := make([]kgo.Opt, 0, len(opts))
	for _, o := range opts {
		if !isGroupOpt(o) {
			out = append(out, o)
		}
	}
	return out
}

func (d *Driver) CreateAdmin(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cfg := driver.NewConfig(a.Object("config"))
	opts := []kgo.Opt{kgo.WithLogger(logger{})}
	saved := d.bootstrap
	if err := cfg.Apply(d.common(cfg, &opts)); err != nil {
		return nil, err
	}
	if _, given := cfg.Peek("bootstrap.servers"); !given {
		if len(saved) == 0 {
			return nil, driver.NoAdminBootstrap()
		}
		opts = append(opts, kgo.SeedBrokers(saved...))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	d.adminRaw, d.admin = cl, kadm.NewClient(cl)
	return map[string]any{}, nil
}

func (d *Driver) adminClient(dl driver.Deadline) (*kadm.Client, error) {
	if d.admin == nil {
		if _, err := d.CreateAdmin(driver.Args{}, dl); err != nil {
			return nil, err
		}
	}
	return d.admin, nil
}

func (d *Driver) Close(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	closed := []string{}
	if driver.Closes(a, "producer") && d.producer != nil {
		ctx, cancel := ctxFor(dl)
		_ = d.producer.Flush(ctx)
		cancel()
		d.producer.Close()
		d.producer = nil
		closed = append(closed, "producer")
	}
	if driver.Closes(a, "consumer") && d.consumerOpts != nil {
		if d.consumer != nil {
			// A group consumer leaves its group in Close, and the leave waits for a rebalance to be
			// allowed: with BlockRebalanceOnPoll (subscribe) the rebalance the last poll held back
			// must be allowed first, or Close blocks forever and the member never leaves (the
			// process was killed at the close's deadline, its partitions stuck until the session
			// timed out: cases/eos/consumer_protocol_rebalance).
			d.consumer.AllowRebalance()
			d.consumer.Close()
		}
		d.consumer, d.consumerOpts = nil, nil
		closed = append(closed, "consumer")
	}
	if driver.Closes(a, "admin") && d.admin != nil {
		d.adminRaw.Close()
		d.admin, d.adminRaw = nil, nil
		closed = append(closed, "admin")
	}
	return map[string]any{"closed": closed}, nil
}

func (d *Driver) prod() (*kgo.Client, error) {
	if d.producer == nil {
		return nil, driver.NoProducer()
	}
	return d.producer, nil
}

func (d *Driver) cons() (*kgo.Client, error) {
	if d.consumerOpts == nil {
		return nil, driver.NoConsumer()
	}
	return d.consumer, nil
}

// -- transactions ----------------------------------------------------------------------------------

func (d *Driver) InitTransactions(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod()
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	id, epoch, err := p.ProducerID(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"producer_id": id, "producer_epoch": epoch}, nil
}

func (d *Driver) BeginTransaction(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod()
	if err != nil {
		return nil, err
	}
	if err := p.BeginTransaction(); err != nil {
		return nil, err
	}
	d.offsetsAdded = false
	return map[string]any{}, nil
}

func (d *Driver) CommitTransaction(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	return d.endTransaction(dl, kgo.TryCommit, (*kgo.Client).Flush)
}

func (d *Driver) AbortTransaction(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	return d.endTransaction(dl, kgo.TryAbort, (*kgo.Client).AbortBufferedRecords)
}

// endTransaction ends the transaction the way franz-go's docs ask: the buffered records first
// (flushed for a commit, dropped for an abort), then EndTransaction.
func (d *Driver) endTransaction(dl driver.Deadline, how kgo.TransactionEndTry,
	settle func(*kgo.Client, context.Context) error) (map[string]any, error) {
	p, err := d.prod()
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	if err := settle(p, ctx); err != nil {
		return nil, err
	}
	if err := p.EndTransaction(ctx, how); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

func (d *Driver) SendOffsetsToTransaction(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod()
	if err != nil {
		return nil, err
	}
	offsets, err := a.TopicPartitions("offsets")
	if err != nil {
		return nil, err
	}
	consumerGroup := ""
	if d.consumerOpts != nil {
		consumerGroup = d.group
	}
	group, err := driver.OffsetsGroup(consumerGroup, a)
	if err != nil {
		return nil, err
	}
	member, generation := "", int32(-1) // an assigned consumer is no group member
	if consumerGroup != "" && d.grouped {
		member, generation = d.consumer.GroupMetadata()
	}
	st := readState(p)
	if st.read && !st.inTxn {
		// franz-go's commitTransactionOffsets answers errNotInTransaction here.
		return nil, driver.Reported(driver.Local("ILLEGAL_STATE",
			"cannot commit offsets transactionally if not in a transaction", "kgo.errNotInTransaction"))
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	id, epoch, err := p.ProducerID(ctx)
	if err != nil {
		return nil, err
	}
	txnID := p.OptValue(kgo.TransactionalID).(string)
	if !d.offsetsAdded && !st.tv2 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, id, epoch, group
		err := withConcurrentTransactions(ctx, func() error {
			resp, err := req.RequestWith(ctx, p)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		})
		if err != nil {
			return nil, err
		}
	}
	d.offsetsAdded = true
	var topicIDs map[string][16]byte
	if txnOffsetCommitHasTopicIDs {
		if topicIDs, err = d.topicIDs(ctx, p, offsets); err != nil {
			return nil, err
		}
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, id, epoch
	req.Generation, req.MemberID = generation, member
	byTopic := map[string]int{}
	for _, o := range offsets {
		i, ok := byTopic[o.Topic]
		if !ok {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic = o.Topic
			setTxnOffsetCommitTopicID(&t, topicIDs[o.Topic])
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[o.Topic] = i
		}
		part := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		part.Partition, part.Offset, part.LeaderEpoch = o.Partition, *o.Offset, -1
		part.Metadata = o.Metadata
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, part)
	}
	resp, err := req.RequestWith(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, t := range resp.Topics {
		for _, part := range t.Partitions {
			if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
				return nil, err
			}
		}
	}
	return map[string]any{"group_id": group}, nil
}

// withConcurrentTransactions retries CONCURRENT_TRANSACTIONS within ctx, as franz-go's
// doWithConcurrentTransactions does for its own AddOffsetsToTxn.
func withConcurrentTransactions(ctx context.Context, fn func() error) error {
	backoff := 20 * time.Millisecond
	for {
		err := fn()
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

// topicIDs: TxnOffsetCommit v6 names topics by id (KIP-1319); the request carries both, so it
// reads right at whatever version franz-go negotiates.
func (d *Driver) topicIDs(ctx context.Context, cl *kgo.Client, offsets []driver.TopicPartition) (map[string][16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	seen := map[string]bool{}
	for _, o := range offsets {
		if !seen[o.Topic] {
			seen[o.Topic] = true
			t := kmsg.NewMetadataRequestTopic()
			name := o.Topic
			t.Topic = &name
			req.Topics = append(req.Topics, t)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[string][16]byte{}
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out[*t.Topic] = t.TopicID
		}
	}
	return out, nil
}

// -- produce ---------------------------------------------------------------------------------------

type manualKey struct{}

// partitioner: a record the op gave a partition goes there (kgo.ManualPartitioner's rule); the
// others go where franz-go's default partitioner puts them.
type partitioner struct{}

func (partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return topicPartitioner{kgo.StickyKeyPartitioner(nil).ForTopic(topic)}
}

type topicPartitioner struct{ def kgo.TopicPartitioner }

func (t topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Context != nil && r.Context.Value(manualKey{}) != nil || t.def.RequiresConsistency(r)
}

func (t topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context != nil && r.Context.Value(manualKey{}) != nil {
		return int(r.Partition)
	}
	return t.def.Partition(r, n)
}

func (d *Driver) record(a driver.Args) (*kgo.Record, error) {
	r := &kgo.Record{Topic: a.Str("topic"), Context: context.Background()}
	var err error
	var null bool
	if r.Key, null, err = driver.Payload(a["key"]); err != nil {
		return nil, err
	} else if !null && r.Key == nil {
		r.Key = []byte{}
	}
	if r.Value, null, err = driver.Payload(a["value"]); err != nil {
		return nil, err
	} else if !null && r.Value == nil {
		r.Value = []byte{}
	}
	headers, err := a.Headers()
	if err != nil {
		return nil, err
	}
	for _, h := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if p, err := a.OptInt("partition"); err != nil {
		return nil, err
	} else if p != nil {
		r.Partition = int32(*p)
		r.Context = context.WithValue(r.Context, manualKey{}, true)
	}
	if ts, err := a.OptInt("timestamp_ms"); err != nil {
		return nil, err
	} else if ts != nil {
		r.Timestamp = time.UnixMilli(*ts)
	}
	return r, nil
}

func delivered(r *kgo.Record) map[string]any {
	return map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
		"timestamp_ms": r.Timestamp.UnixMilli()}
}

func (d *Driver) Send(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod()
	if err != nil {
		return nil, err
	}
	r, err := d.record(a)
	if err != nil {
		return nil, err
	}
	if !a.Bool("wait", true) {
		seq := d.deliveries.New()
		p.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err != nil {
				d.deliveries.Complete(seq, map[string]any{"topic": r.Topic, "partition": r.Partition,
					"error": d.Normalise(err, "send")})
				return
			}
			d.deliveries.Complete(seq, delivered(r))
		})
		return map[string]any{"queued": true, "seq": seq}, nil
	}
	done := make(chan error, 1)
	p.Produce(context.Background(), r, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return delivered(r), nil
	case <-time.After(dl.Remaining()):
		return nil, driver.Fail("DEADLINE_EXCEEDED", "no delivery result before the deadline")
	}
}

func (d *Driver) Flush(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod()
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	_ = p.Flush(ctx) // judged by what is still outstanding
	return d.deliveries.Flushed()
}

// -- consume ---------------------------------------------------------------------------------------

func (d *Driver) Subscribe(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if _, err := d.cons(); err != nil {
		return nil, err
	}
	if d.group == "" {
		return nil, driver.Fail("INVALID_ARGUMENT", "subscribe needs group.id")
	}
	topics, err := a.Strings("topics")
	if err != nil {
		return nil, err
	}
	// BlockRebalanceOnPoll + AllowRebalance at the start of every poll: the group rebalances only
	// while the driver polls, as Java's KafkaConsumer does inside poll(), never between a poll and
	// the transaction that copies what it returned (franz-go otherwise revokes in the background,
	// and a copier commits offsets of partitions it no longer owns within the new generation).
	opts := append(append([]kgo.Opt{}, d.consumerOpts...), kgo.ConsumerGroup(d.group), kgo.ConsumeTopics(topics...),
		kgo.BlockRebalanceOnPoll())
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	d.consumer.Close()
	d.consumer, d.grouped, d.subscribed = cl, true, topics
	return map[string]any{}, nil
}

func (d *Driver) Assign(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cl, err := d.cons()
	if err != nil {
		return nil, err
	}
	if d.grouped {
		return nil, driver.Fail("ILLEGAL_STATE", "assign after subscribe")
	}
	parts, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	start, err := d.startOffsets(ctx, cl, parts)
	if err != nil {
		return nil, err
	}
	if len(d.assigned) > 0 {
		old := map[string][]int32{}
		for _, tp := range d.assigned {
			old[tp.Topic] = append(old[tp.Topic], tp.Partition)
		}
		cl.RemoveConsumePartitions(old)
	}
	add := map[string]map[int32]kgo.Offset{}
	d.posMu.Lock()
	d.positions = map[string]map[int32]int64{}
	for _, tp := range parts {
		if add[tp.Topic] == nil {
			add[tp.Topic] = map[int32]kgo.Offset{}
			d.positions[tp.Topic] = map[int32]int64{}
		}
		off := start[tp.Topic][tp.Partition]
		add[tp.Topic][tp.Partition] = kgo.NewOffset().At(off)
		d.positions[tp.Topic][tp.Partition] = off
	}
	d.posMu.Unlock()
	d.assigned = parts
	cl.AddConsumePartitions(add)
	return map[string]any{}, nil
}

// startOffsets: the given offset, else the group's committed one, else auto.offset.reset's.
func (d *Driver) startOffsets(ctx context.Context, cl *kgo.Client, parts []driver.TopicPartition) (map[string]map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	out := map[string]map[int32]int64{}
	var missing []driver.TopicPartition
	var committed kadm.OffsetResponses
	needCommitted := false
	for _, tp := range parts {
		if tp.Offset == nil {
			needCommitted = true
		}
	}
	if needCommitted && d.group != "" {
		var err error
		if committed, err = adm.FetchOffsets(ctx, d.group); err != nil {
			return nil, err
		}
		if err := committed.Error(); err != nil {
			return nil, err
		}
	}
	for _, tp := range parts {
		if out[tp.Topic] == nil {
			out[tp.Topic] = map[int32]int64{}
		}
		switch {
		case tp.Offset != nil:
			out[tp.Topic][tp.Partition] = *tp.Offset
		default:
			if o, ok := committed.Lookup(tp.Topic, tp.Partition); ok && o.At >= 0 {
				out[tp.Topic][tp.Partition] = o.At
			} else {
				missing = append(missing, tp)
			}
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	names := driver.Topics(missing)
	var listed kadm.ListedOffsets
	var err error
	switch {
	case !d.resetLatest:
		listed, err = adm.ListStartOffsets(ctx, names...)
	case d.readCommitted:
		listed, err = adm.ListCommittedOffsets(ctx, names...)
	default:
		listed, err = adm.ListEndOffsets(ctx, names...)
	}
	if err != nil {
		return nil, err
	}
	for _, tp := range missing {
		lo, ok := listed.Lookup(tp.Topic, tp.Partition)
		if !ok {
			return nil, kerr.UnknownTopicOrPartition
		}
		if lo.Err != nil {
			return nil, lo.Err
		}
		out[tp.Topic][tp.Partition] = lo.Offset
	}
	return out, nil
}

func (d *Driver) Poll(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cl, err := d.cons()
	if err != nil {
		return nil, err
	}
	if len(d.assigned) == 0 && !d.grouped {
		return nil, driver.Fail("ILLEGAL_STATE", "poll before assign or subscribe")
	}
	max, window, err := driver.PollWindow(a, dl)
	if err != nil {
		return nil, err
	}
	records := []any{}
	var errs []any
	if d.grouped {
		cl.AllowRebalance() // the rebalance the last poll held back (Subscribe says why) happens now
	}
	for len(records) < max && !window.Expired() {
		step := window.Within(driver.PollStep)
		ctx, cancel := ctxFor(step)
		fetches := cl.PollRecords(ctx, max-len(records))
		cancel()
		fetches.EachError(func(topic string, partition int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			info := d.Normalise(err, "poll")
			errs = append(errs, map[string]any{"topic": topic, "partition": partition, "error": info})
		})
		fetches.EachRecord(func(r *kgo.Record) {
			d.advance(r.Topic, r.Partition, r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			hs := make([]driver.Header, 0, len(r.Headers))
			for _, h := range r.Headers {
				hs = append(hs, driver.Header{Key: h.Key, Value: h.Value})
			}
			ts := r.Timestamp.UnixMilli()
			records = append(records, driver.RecordRow(r.Topic, r.Partition, r.Offset, r.Key, r.Key == nil,
				r.Value, r.Value == nil, hs, &ts))
		})
	}
	return driver.Polled(records, errs), nil
}

func (d *Driver) advance(topic string, partition int32, next int64) {
	d.posMu.Lock()
	defer d.posMu.Unlock()
	if d.positions[topic] == nil {
		d.positions[topic] = map[int32]int64{}
	}
	if next > d.positions[topic][partition] {
		d.positions[topic][partition] = next
	}
}

func (d *Driver) Position(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if _, err := d.cons(); err != nil {
		return nil, err
	}
	parts, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		parts = d.assigned
	}
	d.posMu.Lock()
	defer d.posMu.Unlock()
	out := []any{}
	for _, tp := range parts {
		off, ok := d.positions[tp.Topic][tp.Partition]
		if !ok {
			return nil, driver.NotAssigned(tp)
		}
		out = append(out, map[string]any{"topic": tp.Topic, "partition": tp.Partition, "offset": off})
	}
	return map[string]any{"positions": out}, nil
}

func (d *Driver) Commit(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cl, err := d.cons()
	if err != nil {
		return nil, err
	}
	if d.group == "" {
		return nil, driver.Fail("INVALID_ARGUMENT", "commit needs group.id")
	}
	parts, err := a.TopicPartitions("offsets")
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	if d.grouped && len(parts) == 0 {
		return map[string]any{}, cl.CommitUncommittedOffsets(ctx)
	}
	offsets := kadm.Offsets{}
	if len(parts) == 0 {
		d.posMu.Lock()
		for _, tp := range d.assigned {
			offsets.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: d.positions[tp.Topic][tp.Partition], LeaderEpoch: -1})
		}
		d.posMu.Unlock()
	}
	for _, tp := range parts {
		o := kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: *tp.Offset, LeaderEpoch: -1}
		if tp.Metadata != nil {
			o.Metadata = *tp.Metadata
		}
		offsets.Add(o)
	}
	if d.grouped {
		epochs := map[string]map[int32]kgo.EpochOffset{}
		offsets.Each(func(o kadm.Offset) {
			if epochs[o.Topic] == nil {
				epochs[o.Topic] = map[int32]kgo.EpochOffset{}
			}
			epochs[o.Topic][o.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o.At}
		})
		var cerr error
		cl.CommitOffsetsSync(ctx, epochs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = err
			if err == nil {
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if e := kerr.ErrorForCode(p.ErrorCode); e != nil && cerr == nil {
							cerr = e
						}
					}
				}
			}
		})
		return map[string]any{}, cerr
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, d.group, offsets)
	if err != nil {
		return nil, err
	}
	if err := resp.Error(); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

func (d *Driver) Committed(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cl, err := d.cons()
	if err != nil {
		return nil, err
	}
	parts, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, d.group)
	if err != nil {
		return nil, err
	}
	if err := resp.Error(); err != nil {
		return nil, err
	}
	out := []any{}
	for _, tp := range parts {
		row := map[string]any{"topic": tp.Topic, "partition": tp.Partition, "offset": nil, "metadata": nil}
		if o, ok := resp.Lookup(tp.Topic, tp.Partition); ok && o.At >= 0 {
			row["offset"], row["metadata"] = o.At, o.Metadata
		}
		out = append(out, row)
	}
	return map[string]any{"offsets": out}, nil
}

// -- admin -----------------------------------------------------------------------------------------

func (d *Driver) DescribeTransactions(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	adm, err := d.adminClient(dl)
	if err != nil {
		return nil, err
	}
	ids, err := a.Strings("ids")
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		return nil, err
	}
	out := []any{}
	for _, id := range ids {
		t, ok := described[id]
		switch {
		case !ok:
			out = append(out, map[string]any{"transactional_id": id, "error": d.Normalise(err, "describe_transactions")})
		case t.Err != nil:
			out = append(out, map[string]any{"transactional_id": id, "error": d.Normalise(t.Err, "describe_transactions")})
		default:
			parts := map[string][]int32{}
			for topic, ps := range t.Topics {
				for p := range ps {
					parts[topic] = append(parts[topic], p)
				}
			}
			out = append(out, map[string]any{"transactional_id": id, "state": t.State,
				"producer_id": t.ProducerID, "producer_epoch": t.ProducerEpoch, "timeout_ms": t.TimeoutMillis,
				"coordinator_id": t.Coordinator, "partitions": driver.PartitionRows(parts)})
		}
	}
	return map[string]any{"transactions": out}, nil
}

func (d *Driver) DescribeProducers(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	adm, err := d.adminClient(dl)
	if err != nil {
		return nil, err
	}
	parts, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for _, tp := range parts {
		set.Add(tp.Topic, tp.Partition)
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil && len(described) == 0 {
		return nil, err
	}
	out := []any{}
	for _, tp := range parts {
		row := map[string]any{"topic": tp.Topic, "partition": tp.Partition}
		p, ok := described[tp.Topic].Partitions[tp.Partition]
		switch {
		case !ok:
			row["error"] = d.Normalise(err, "describe_producers")
		case p.Err != nil:
			row["error"] = d.Normalise(p.Err, "describe_producers")
		default:
			producers := []any{}
			for _, s := range p.ActiveProducers.Sorted() {
				producers = append(producers, driver.ProducerRow(s.ProducerID, int32(s.ProducerEpoch), s.LastSequence,
					s.LastTimestamp, s.CoordinatorEpoch, s.CurrentTxnStartOffset))
			}
			row["producers"] = producers
		}
		out = append(out, row)
	}
	return map[string]any{"partitions": out}, nil
}

func (d *Driver) ListOffsets(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	adm, err := d.adminClient(dl)
	if err != nil {
		return nil, err
	}
	parts, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	spec, ts, err := a.OffsetSpec()
	if err != nil {
		return nil, err
	}
	names := driver.Topics(parts)
	ctx, cancel := ctxFor(dl)
	defer cancel()
	var listed kadm.ListedOffsets
	driver.RetryRead(dl, func() bool {
		switch {
		case spec == "earliest":
			listed, err = adm.ListStartOffsets(ctx, names...)
		case spec == "timestamp":
			listed, err = adm.ListOffsetsAfterMilli(ctx, ts, names...)
		case a.ReadCommitted():
			listed, err = adm.ListCommittedOffsets(ctx, names...)
		default:
			listed, err = adm.ListEndOffsets(ctx, names...)
		}
		if err == nil {
			err = listed.Error()
		}
		return err != nil && worthRetrying(err)
	})
	if err != nil && len(listed) == 0 {
		return nil, err
	}
	out := []any{}
	for _, tp := range parts {
		row := map[string]any{"topic": tp.Topic, "partition": tp.Partition}
		lo, ok := listed.Lookup(tp.Topic, tp.Partition)
		switch {
		case !ok:
			row["error"] = d.Normalise(kerr.UnknownTopicOrPartition, "list_offsets")
		case lo.Err != nil:
			row["error"] = d.Normalise(lo.Err, "list_offsets")
		default:
			row["offset"] = lo.Offset
			if lo.Timestamp >= 0 {
				row["timestamp_ms"] = lo.Timestamp
			} else {
				row["timestamp_ms"] = nil
			}
		}
		out = append(out, row)
	}
	return map[string]any{"offsets": out}, nil
}

func (d *Driver) CreateTopics(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	adm, err := d.adminClient(dl)
	if err != nil {
		return nil, err
	}
	topics, err := driver.NewTopics(a)
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxFor(dl)
	defer cancel()
	out := []any{}
	for _, t := range topics {
		resp, err := adm.CreateTopic(ctx, t.Partitions, t.ReplicationFactor, t.Configs, t.Name)
		if err == nil {
			err = resp.Err
		}
		out = append(out, driver.TopicResult(t.Name, err, d.Normalise))
	}
	return map[string]any{"topics": out}, nil
}

// -- errors ----------------------------------------------------------------------------------------

// Normalise: see the package doc for where each flag comes from.
func (d *Driver) Normalise(err error, op string) driver.ErrorInfo {
	var info driver.ErrorInfo
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		info = driver.FromCode(ke.Code, err.Error(), "kerr.Error")
		if outer := driver.TypeName(err); outer != "kerr.Error" {
			info.ClientClass, info.CauseClass = outer, "kerr.Error"
		}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		info = driver.DriverError("DEADLINE_EXCEEDED", op+": "+err.Error())
		info.ClientClass = driver.TypeName(err)
	case errors.Is(err, kgo.ErrRecordTimeout):
		info = driver.Local("REQUEST_TIMED_OUT", err.Error(), "kgo.ErrRecordTimeout")
	case errors.Is(err, kgo.ErrAborting):
		info = driver.Local("TRANSACTION_ABORTED", err.Error(), "kgo.ErrAborting")
	case errors.Is(err, kgo.ErrClientClosed):
		info = driver.Local("ILLEGAL_STATE", err.Error(), "kgo.ErrClientClosed")
	case isNetErr(err):
		info = driver.Local("NETWORK_EXCEPTION", err.Error(), driver.TypeName(err))
	case strings.Contains(err.Error(), "invalid attempt to") || strings.Contains(err.Error(), "not in a transaction") ||
		strings.Contains(err.Error(), "cannot retry a commit whose outcome is unconfirmed"):
		info = driver.Local("ILLEGAL_STATE", err.Error(), driver.TypeName(err))
	case strings.Contains(err.Error(), "invalid record partitioning choice"):
		info = driver.Local("UNKNOWN_TOPIC_OR_PARTITION", err.Error(), driver.TypeName(err))
	default:
		info = driver.Local("CLIENT_ERROR", err.Error(), driver.TypeName(err))
	}
	info.Retriable = kerr.IsRetriable(err)
	info.Fenced = errors.Is(err, kerr.ProducerFenced)
	if driver.ProducerOps[op] && d.producer != nil && d.txnal {
		st := readState(d.producer)
		info.Extra = withExtra(info.Extra, "state_read", st.read)
		if st.read {
			info.Extra["tv2"] = st.tv2
			abortable, fatal := st.classify()
			info.Abortable, info.Fatal = abortable, fatal
		}
		if errors.Is(err, kerr.OperationNotAttempted) || errors.Is(err, kerr.TransactionAbortable) {
			info.Abortable = true
		}
	}
	return info
}

// worthRetrying: a transport failure or a retriable Kafka error (kerr's flag).
func worthRetrying(err error) bool {
	var ke *kerr.Error
	return !errors.As(err, &ke) || ke.Retriable
}

func withExtra(m map[string]any, k string, v any) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	m[k] = v
	return m
}

func isNetErr(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "EOF")
}

// producerState is what franz-go holds about its transactional producer (kgo.producer, private).
type producerState struct {
	read      bool
	inTxn     bool
	tv2       bool
	idVersion int16
	idErr     error
}

// readState reads the producer's private state by reflection (fields of franz-go v1.22.2's
// kgo.producer: id, idVersion, inTxn, tx890p2). Nothing is written.
func readState(cl *kgo.Client) (st producerState) {
	defer func() {
		if recover() != nil {
			st = producerState{}
		}
	}()
	p := reflect.ValueOf(cl).Elem().FieldByName("producer")
	st.inTxn = p.FieldByName("inTxn").Bool()
	st.idVersion = int16(p.FieldByName("idVersion").Int())
	st.tv2 = p.FieldByName("tx890p2").FieldByName("v").Uint() != 0
	id := p.FieldByName("id").FieldByName("v") // atomic.Value's any
	if !id.IsNil() {
		pid := id.Elem().Elem() // *producerID -> producerID
		errField := pid.FieldByName("err")
		errField = reflect.NewAt(errField.Type(), unsafe.Pointer(errField.UnsafeAddr())).Elem()
		if !errField.IsNil() {
			st.idErr = errField.Interface().(error)
		}
	}
	st.read = true
	return st
}

// classify applies maybeRecoverProducerID's rule (kgo/txn.go, v1.22.2) to the stored error.
func (st producerState) classify() (abortable, fatal bool) {
	if st.idErr == nil {
		return false, false
	}
	var ke *kerr.Error
	if !errors.As(st.idErr, &ke) || ke.Retriable {
		return true, false // transport failure, reload marker or retriable code: the id is reloaded
	}
	var recoverable bool
	if st.tv2 {
		recoverable = errors.Is(ke, kerr.UnknownProducerID) || errors.Is(ke, kerr.TransactionAbortable)
	} else {
		recoverable = st.idVersion >= 3 && (errors.Is(ke, kerr.UnknownProducerID) || errors.Is(ke, kerr.InvalidProducerIDMapping)) ||
			st.idVersion >= 4 && errors.Is(ke, kerr.InvalidProducerEpoch)
	}
	return recoverable, !recoverable
}
