// Package saramadrv is kconform's driver for Sarama (github.com/IBM/sarama, pinned in go.mod): one
// AsyncProducer, one consumer (partition consumers, or a ConsumerGroup after subscribe) and a
// ClusterAdmin behind the driver protocol.
//
// How the ops map onto Sarama, as an application uses it:
//
//   - Sarama runs InitProducerId inside NewAsyncProducer, so create_producer only checks the config
//     (Config.Validate) and init_transactions builds the client and the producer -- the call that
//     initialises transactions, as Java's initTransactions; when Sarama gives up on
//     CONCURRENT_TRANSACTIONS it builds it again, as an application must (see InitTransactions).
//     A producer without a transactional.id is built on first use.
//   - begin/commit/abort are BeginTxn/CommitTxn/AbortTxn. Sarama speaks the older transaction
//     protocol only (TV1: AddPartitionsToTxn before the first record to a partition, EndTxn <= v3)
//     whatever the broker advertises, with the protocol versions of Config.Version (KafkaVersion:
//     4.0, the line the targets run).
//   - send_offsets_to_transaction is AddOffsetsToTxnWithGroupMetadata with the consumer's group
//     metadata: a ConsumerGroup member's (NewConsumerGroupMetadataFromSession: member id,
//     generation -- KIP-447, TxnOffsetCommit v3), else the group id alone (generation -1), as Java's
//     assign-mode consumer. Sarama only records the offsets here: AddOffsetsToTxn and
//     TxnOffsetCommit go out inside CommitTxn, and only when the transaction produced a record.
//   - flush waits for the deliveries of wait=false sends (Sarama has no flush call).
//   - The consumer: assign starts partition consumers at the given offset, else the group's
//     committed one (OffsetManager.ManagePartition.NextOffset), else auto.offset.reset's, resolved
//     to an offset with ListOffsets as Java's consumer does. position is the next offset after the
//     last record handed out, or -- once nothing is buffered for the partition -- the partition
//     consumer's fetch offset, which has moved past transaction markers and aborted records
//     (Sarama's private partitionConsumer.offset, read by reflection). commit/committed are
//     OffsetCommit/OffsetFetch to the group coordinator (generation -1, as an assigned consumer);
//     with enable.auto.commit the OffsetManager commits the polled offsets at its interval.
//   - describe_transactions is the broker-level DescribeTransactions request at the coordinator,
//     describe_producers DescribeProducers at the partition's leader (the requests Sarama's
//     TransactionClusterAdmin sends, asked per id / partition so that one error stays that
//     row's); list_offsets is ListOffsets with the isolation level.
//
// Classification -- Sarama's own notions:
//
//   - abortable / fatal: the producer's TxnStatus() after the failure: ProducerTxnFlagAbortableError
//     and ProducerTxnFlagFatalError. Sarama moves to the error state before it hands the failed
//     message to Errors() (returnError), so the state read after a failed send is settled.
//   - retriable: Sarama has no retriable notion on its errors (it decides retries inside each
//     request loop); retriable is always false and the driver says so in the reply
//     (retriable_known: false).
//   - fenced: the Kafka code is PRODUCER_FENCED. Sarama's KError(90).Error() may read "Unknown
//     error, how did this happen?" (IBM/sarama#2859): names come from the code, never the message.
package saramadrv

import (
	"context"
	"errors"
	"log"
	"net"
	"os"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"kconform/clients/go/internal/driver"
)

// Version is the Sarama module version linked in.
func Version() string { return driver.ModuleVersion("github.com/IBM/sarama") }

func init() {
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
}

// Driver holds at most one producer, one consumer and one admin.
type Driver struct {
	prodConf   *sarama.Config
	prodAddrs  []string
	prodClient sarama.Client
	producer   sarama.AsyncProducer

	consConf    *sarama.Config
	consAddrs   []string
	group       string
	autoCommit  bool
	consClient  sarama.Client
	consumer    sarama.Consumer
	offsets     sarama.OffsetManager
	assignment  []driver.TopicPartition
	parts       []*partition
	groupCons   *groupConsumer
	consCreated bool

	admin      sarama.Client
	adminAddrs []string
	bootstrap  []string
	deliveries driver.Deliveries
}

// New returns an empty driver.
func New() *Driver { return &Driver{} }

// Hello names the library.
func (d *Driver) Hello() map[string]any {
	hello := driver.Hello("sarama", "github.com/IBM/sarama")
	hello["kafka_version"] = KafkaVersion.String()
	return hello
}

// Unsupported: none.
func (d *Driver) Unsupported() map[string]string { return map[string]string{} }

// Ops maps the protocol's ops onto the methods below.
func (d *Driver) Ops() map[string]driver.Op { return driver.OpsOf(d) }

// -- config ----------------------------------------------------------------------------------------

func millis(set func(time.Duration)) func(string) error {
	return func(v string) error {
		ms, err := driver.Millis(v)
		if err == nil {
			set(time.Duration(ms) * time.Millisecond)
		}
		return err
	}
}

func (d *Driver) common(conf *sarama.Config, addrs *[]string) map[string]func(string) error {
	return map[string]func(string) error{
		"bootstrap.servers": func(v string) error {
			if *addrs = driver.Servers(v); len(*addrs) == 0 {
				return errors.New("no servers")
			}
			d.bootstrap = *addrs
			return nil
		},
		"client.id": func(v string) error { conf.ClientID = v; return nil },
		"retry.backoff.ms": millis(func(t time.Duration) {
			conf.Metadata.Retry.Backoff, conf.Producer.Retry.Backoff = t, t
			conf.Producer.Transaction.Retry.Backoff, conf.Consumer.Retry.Backoff = t, t
		}),
	}
}

// javaDeliveryTimeout is the Java producer's default delivery.timeout.ms, the bound its "retry
// forever" setting means (producerConfig).
const javaDeliveryTimeout = 120 * time.Second

// KafkaVersion is the Config.Version every client of the driver uses: the Kafka line the targets
// run (4.x). Sarama picks its request versions from it; its default (V2_8_0_0) refuses
// DescribeTransactions (3.0+) on the client side.
var KafkaVersion = sarama.V4_0_0_0

func newConfig() *sarama.Config {
	conf := sarama.NewConfig()
	conf.Version = KafkaVersion
	conf.Producer.Return.Successes = true
	conf.Producer.Return.Errors = true
	conf.Consumer.Return.Errors = true
	applySecurity(conf)
	return conf
}

func (d *Driver) producerConfig(cfg driver.Config) (*sarama.Config, []string, error) {
	conf := newConfig()
	var addrs []string
	m := d.common(conf, &addrs)
	idempotent := false
	m["transactional.id"] = func(v string) error { conf.Producer.Transaction.ID = v; idempotent = true; return nil }
	m["transaction.timeout.ms"] = millis(func(t time.Duration) { conf.Producer.Transaction.Timeout = t })
	m["enable.idempotence"] = func(v string) (err error) { idempotent, err = driver.Flag(v); return err }
	m["acks"] = func(v string) error {
		switch v {
		case "all", "-1":
			conf.Producer.RequiredAcks = sarama.WaitForAll
		case "1":
			conf.Producer.RequiredAcks = sarama.WaitForLocal
		case "0":
			conf.Producer.RequiredAcks = sarama.NoResponse
		default:
			return errors.New("acks must be all, -1, 0 or 1")
		}
		return nil
	}
	m["retries"] = func(v string) error {
		n, err := strconv.Atoi(v)
		conf.Producer.Retry.Max = n
		return err
	}
	m["linger.ms"] = millis(func(t time.Duration) { conf.Producer.Flush.Frequency = t })
	m["max.in.flight.requests.per.connection"] = func(v string) error {
		n, err := strconv.Atoi(v)
		conf.Net.MaxOpenRequests = n
		return err
	}
	// Sarama documents Producer.Timeout as "equivalent to the JVM producer's request.timeout.ms"
	// (what the broker may take to answer a produce). Its client-side wait is Net.ReadTimeout
	// (30 s), which Java has no separate name for: it stays Sarama's.
	m["request.timeout.ms"] = millis(func(t time.Duration) { conf.Producer.Timeout = t })
	if err := cfg.Apply(m); err != nil {
		return nil, nil, err
	}
	// Java's retries=2147483647 is its "retry until delivery.timeout.ms (120 s) is spent" idiom
	// (KIP-91). Sarama has no delivery timeout, and allocates state for every retry it allows
	// (retries 2^31 made it die of out-of-memory): the closest Sarama application retries as
	// often as fits in Java's default delivery timeout at its retry backoff.
	if fit := int(javaDeliveryTimeout / max(conf.Producer.Retry.Backoff, time.Millisecond)); conf.Producer.Retry.Max > fit {
		conf.Producer.Retry.Max = fit
	}
	if idempotent {
		// What Sarama requires of an idempotent producer (Config.Validate says so otherwise).
		conf.Producer.Idempotent = true
		conf.Net.MaxOpenRequests = 1
		conf.Producer.RequiredAcks = sarama.WaitForAll
	}
	conf.Producer.Partitioner = partitioner
	return conf, addrs, nil
}

func (d *Driver) consumerConfig(cfg driver.Config) (*sarama.Config, []string, error) {
	conf := newConfig()
	var addrs []string
	m := d.common(conf, &addrs)
	d.autoCommit = true
	m["group.id"] = func(v string) error { d.group = v; return nil }
	m["isolation.level"] = func(v string) error {
		switch v {
		case "read_committed":
			conf.Consumer.IsolationLevel = sarama.ReadCommitted
		case "read_uncommitted":
			conf.Consumer.IsolationLevel = sarama.ReadUncommitted
		default:
			return errors.New("read_committed or read_uncommitted")
		}
		return nil
	}
	m["auto.offset.reset"] = func(v string) error {
		switch v {
		case "earliest":
			conf.Consumer.Offsets.Initial = sarama.OffsetOldest
		case "latest":
			conf.Consumer.Offsets.Initial = sarama.OffsetNewest
		default:
			return errors.New("earliest or latest (Sarama has no 'none')")
		}
		return nil
	}
	m["enable.auto.commit"] = func(v string) (err error) { d.autoCommit, err = driver.Flag(v); return err }
	m["request.timeout.ms"] = millis(func(t time.Duration) { conf.Net.ReadTimeout = t }) // no produce here
	m["auto.commit.interval.ms"] = millis(func(t time.Duration) { conf.Consumer.Offsets.AutoCommit.Interval = t })
	m["session.timeout.ms"] = millis(func(t time.Duration) { conf.Consumer.Group.Session.Timeout = t })
	m["heartbeat.interval.ms"] = millis(func(t time.Duration) { conf.Consumer.Group.Heartbeat.Interval = t })
	m["max.poll.interval.ms"] = millis(func(t time.Duration) { conf.Consumer.Group.Rebalance.Timeout = t })
	// Java's assignor classes -> Sarama's balance strategies of the same protocol name. Unset
	// keeps Sarama's own default, [range].
	m["partition.assignment.strategy"] = func(v string) error {
		names, err := driver.AssignorNames(v)
		if err != nil {
			return err
		}
		strategies := make([]sarama.BalanceStrategy, 0, len(names))
		for _, name := range names {
			if strategyNamed[name] == nil { // cooperative-sticky before Sarama 1.60.1 (sarama_cooperative.go)
				return driver.Fail("UNSUPPORTED_BY_CLIENT", "partition.assignment.strategy %s: Sarama %s has no %s balance strategy (1.60.1+)",
					name, Version(), name)
			}
			strategies = append(strategies, strategyNamed[name]())
		}
		conf.Consumer.Group.Rebalance.GroupStrategies = strategies
		return nil
	}
	// Static membership (KIP-345); Config.Validate checks the id as Java does.
	m["group.instance.id"] = func(v string) error {
		if v == "" { // Sarama reads "" as unset
			return errors.New("an instance id must be non-empty (Java's InvalidConfigurationException)")
		}
		conf.Consumer.Group.InstanceId = v
		return nil
	}
	if err := cfg.Apply(m); err != nil {
		return nil, nil, err
	}
	conf.Consumer.Offsets.AutoCommit.Enable = d.autoCommit
	return conf, addrs, nil
}

// strategyNamed: Sarama's balance strategy for each of Java's protocol names
// (driver.JavaAssignors); the cooperative one is stateful, so each consumer gets its own.
var strategyNamed = map[string]func() sarama.BalanceStrategy{
	"range":              sarama.NewBalanceStrategyRange,
	"roundrobin":         sarama.NewBalanceStrategyRoundRobin,
	"sticky":             sarama.NewBalanceStrategySticky,
	"cooperative-sticky": cooperativeSticky, // nil before Sarama 1.60.1
}

func validate(conf *sarama.Config, addrs []string) error {
	if len(addrs) == 0 {
		return driver.Fail("INVALID_ARGUMENT", "config needs bootstrap.servers")
	}
	return conf.Validate()
}

// -- lifecycle -------------------------------------------------------------------------------------

func (d *Driver) CreateProducer(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.prodConf != nil {
		return nil, driver.AlreadyHas("producer")
	}
	cfg := driver.NewConfig(a.Object("config"))
	conf, addrs, err := d.producerConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := validate(conf, addrs); err != nil {
		return nil, err
	}
	d.prodConf, d.prodAddrs = conf, addrs
	return map[string]any{"client_id": driver.ClientID(cfg)}, nil
}

func (d *Driver) CreateConsumer(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.consConf != nil {
		return nil, driver.AlreadyHas("consumer")
	}
	cfg := driver.NewConfig(a.Object("config"))
	conf, addrs, err := d.consumerConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := validate(conf, addrs); err != nil {
		return nil, err
	}
	d.consConf, d.consAddrs = conf, addrs
	return map[string]any{"client_id": driver.ClientID(cfg)}, nil
}

func (d *Driver) CreateAdmin(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	conf := newConfig()
	var addrs []string
	saved := d.bootstrap
	cfg := driver.NewConfig(a.Object("config"))
	if err := cfg.Apply(d.common(conf, &addrs)); err != nil {
		return nil, err
	}
	d.bootstrap = saved
	if len(addrs) == 0 {
		if len(saved) == 0 {
			return nil, driver.NoAdminBootstrap()
		}
		addrs = saved
	}
	if err := validate(conf, addrs); err != nil {
		return nil, err
	}
	cl, err := sarama.NewClient(addrs, conf)
	if err != nil {
		return nil, err
	}
	d.admin = cl
	return map[string]any{}, nil
}

func (d *Driver) adminClient(dl driver.Deadline) (sarama.Client, error) {
	if d.admin == nil {
		if _, err := d.CreateAdmin(driver.Args{}, dl); err != nil {
			return nil, err
		}
	}
	return d.admin, nil
}

func (d *Driver) Close(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	closed := []string{}
	if driver.Closes(a, "producer") && d.prodConf != nil {
		if d.producer != nil {
			_ = d.producer.Close()
			_ = d.prodClient.Close()
		}
		d.prodConf, d.producer, d.prodClient = nil, nil, nil
		closed = append(closed, "producer")
	}
	if driver.Closes(a, "consumer") && d.consConf != nil {
		d.closeConsumer()
		d.consConf = nil
		closed = append(closed, "consumer")
	}
	if driver.Closes(a, "admin") && d.admin != nil {
		_ = d.admin.Close()
		d.admin = nil
		closed = append(closed, "admin")
	}
	return map[string]any{"closed": closed}, nil
}

func (d *Driver) closeConsumer() {
	d.stopPartitions()
	d.assignment = nil
	if d.consumer != nil {
		_ = d.consumer.Close()
		d.consumer = nil
	}
	if d.groupCons != nil {
		d.groupCons.close()
		d.groupCons = nil
	}
	if d.consClient != nil {
		_ = d.consClient.Close()
		d.consClient = nil
	}
}

// -- produce and transactions ----------------------------------------------------------------------

// pending is a sent message's slot for its result (ProducerMessage.Metadata).
type pending struct {
	manual bool
	seq    int64 // 0: the send waits for done
	done   chan error
}

// partitioner puts a record the op gave a partition there; the others where Sarama's default
// (hash) partitioner does.
func partitioner(topic string) sarama.Partitioner {
	return manualOr{sarama.NewHashPartitioner(topic)}
}

type manualOr struct{ def sarama.Partitioner }

func (m manualOr) Partition(msg *sarama.ProducerMessage, n int32) (int32, error) {
	if p, ok := msg.Metadata.(*pending); ok && p.manual {
		return msg.Partition, nil
	}
	return m.def.Partition(msg, n)
}

func (m manualOr) RequiresConsistency() bool { return true }

func (d *Driver) prod(build bool) (sarama.AsyncProducer, error) {
	if d.prodConf == nil {
		return nil, driver.NoProducer()
	}
	if d.producer == nil {
		if !build || d.prodConf.Producer.Transaction.ID != "" {
			return nil, driver.Fail("ILLEGAL_STATE", "the transactional producer is not initialised: call init_transactions first")
		}
		if err := d.buildProducer(); err != nil {
			return nil, err
		}
	}
	return d.producer, nil
}

func (d *Driver) buildProducer() error {
	cl, err := sarama.NewClient(d.prodAddrs, d.prodConf)
	if err != nil {
		return err
	}
	p, err := sarama.NewAsyncProducerFromClient(cl)
	if err != nil {
		_ = cl.Close()
		return err
	}
	d.prodClient, d.producer = cl, p
	go d.results(p)
	return nil
}

// results hands each delivery to its send (or to the next flush).
func (d *Driver) results(p sarama.AsyncProducer) {
	successes, failures := p.Successes(), p.Errors()
	for successes != nil || failures != nil {
		select {
		case msg, ok := <-successes:
			if !ok {
				successes = nil
				continue
			}
			d.deliver(msg, nil)
		case perr, ok := <-failures:
			if !ok {
				failures = nil
				continue
			}
			d.deliver(perr.Msg, perr.Err)
		}
	}
}

func (d *Driver) deliver(msg *sarama.ProducerMessage, err error) {
	p, ok := msg.Metadata.(*pending)
	if !ok {
		return
	}
	if p.seq == 0 {
		p.done <- err
		return
	}
	if err != nil {
		d.deliveries.Complete(p.seq, map[string]any{"topic": msg.Topic, "partition": msg.Partition,
			"error": d.Normalise(err, "send")})
		return
	}
	d.deliveries.Complete(p.seq, delivered(msg))
}

func delivered(msg *sarama.ProducerMessage) map[string]any {
	var ts any
	if !msg.Timestamp.IsZero() {
		ts = msg.Timestamp.UnixMilli()
	}
	return map[string]any{"topic": msg.Topic, "partition": msg.Partition, "offset": msg.Offset, "timestamp_ms": ts}
}

// InitTransactions builds the producer (NewAsyncProducer runs InitProducerId). Sarama gives up
// on CONCURRENT_TRANSACTIONS -- its initProducerId retries only coordinator errors -- which Kafka
// answers while it aborts the open transaction of a producer the new one fences (Kafka's Errors
// has it retriable; Java retries it inside initTransactions). A Sarama application has to build
// its producer again, so the driver does, within the deadline and after Sarama's own
// Transaction.Retry.Backoff, and says how often Sarama gave up (concurrent_transactions).
func (d *Driver) InitTransactions(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.prodConf == nil {
		return nil, driver.NoProducer()
	}
	if d.producer != nil {
		return nil, driver.Fail("ILLEGAL_STATE", "Sarama initialises a producer once, in NewAsyncProducer; start another driver")
	}
	gaveUp := 0
	for {
		err := d.buildProducer()
		if err == nil {
			return map[string]any{"concurrent_transactions": gaveUp}, nil
		}
		if !errors.Is(err, sarama.ErrConcurrentTransactions) || dl.Remaining() < d.prodConf.Producer.Transaction.Retry.Backoff {
			return nil, err
		}
		gaveUp++
		time.Sleep(d.prodConf.Producer.Transaction.Retry.Backoff)
	}
}

func (d *Driver) BeginTransaction(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod(false)
	if err != nil {
		return nil, err
	}
	return map[string]any{}, p.BeginTxn()
}

func (d *Driver) CommitTransaction(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod(false)
	if err != nil {
		return nil, err
	}
	return map[string]any{}, p.CommitTxn()
}

func (d *Driver) AbortTransaction(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod(false)
	if err != nil {
		return nil, err
	}
	return map[string]any{}, p.AbortTxn()
}

func (d *Driver) SendOffsetsToTransaction(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	p, err := d.prod(false)
	if err != nil {
		return nil, err
	}
	offsets, err := a.TopicPartitions("offsets")
	if err != nil {
		return nil, err
	}
	consumerGroup := ""
	if d.consConf != nil {
		consumerGroup = d.group
	}
	group, err := driver.OffsetsGroup(consumerGroup, a)
	if err != nil {
		return nil, err
	}
	meta := sarama.NewConsumerGroupMetadata(group) // generation -1: an assigned consumer is no member
	if consumerGroup != "" && d.groupCons != nil {
		if s := d.groupCons.currentSession(); s != nil {
			meta = sarama.NewConsumerGroupMetadataFromSession(s, group, nil)
		}
	}
	byTopic := map[string][]*sarama.PartitionOffsetMetadata{}
	for _, o := range offsets {
		byTopic[o.Topic] = append(byTopic[o.Topic], &sarama.PartitionOffsetMetadata{
			Partition: o.Partition, Offset: *o.Offset, Metadata: o.Metadata, LeaderEpoch: -1})
	}
	if err := p.AddOffsetsToTxnWithGroupMetadata(byTopic, meta); err != nil {
		return nil, err
	}
	return map[string]any{"group_id": meta.GroupID}, nil
}

func (d *Driver) message(a driver.Args) (*sarama.ProducerMessage, *pending, error) {
	msg := &sarama.ProducerMessage{Topic: a.Str("topic")}
	pend := &pending{}
	key, null, err := driver.Payload(a["key"])
	if err != nil {
		return nil, nil, err
	}
	if !null {
		msg.Key = sarama.ByteEncoder(nonNil(key))
	}
	value, null, err := driver.Payload(a["value"])
	if err != nil {
		return nil, nil, err
	}
	if !null {
		msg.Value = sarama.ByteEncoder(nonNil(value))
	}
	headers, err := a.Headers()
	if err != nil {
		return nil, nil, err
	}
	for _, h := range headers {
		msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	if p, err := a.OptInt("partition"); err != nil {
		return nil, nil, err
	} else if p != nil {
		msg.Partition, pend.manual = int32(*p), true
	}
	if ts, err := a.OptInt("timestamp_ms"); err != nil {
		return nil, nil, err
	} else if ts != nil {
		msg.Timestamp = time.UnixMilli(*ts)
	}
	msg.Metadata = pend
	return msg, pend, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (d *Driver) Send(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	msg, pend, err := d.message(a)
	if err != nil {
		return nil, err
	}
	p, err := d.prod(true)
	if err != nil {
		return nil, err
	}
	wait := a.Bool("wait", true)
	if wait {
		pend.done = make(chan error, 1)
	} else {
		pend.seq = d.deliveries.New()
	}
	timer := time.NewTimer(dl.Remaining())
	defer timer.Stop()
	select {
	case p.Input() <- msg:
	case <-timer.C:
		return nil, driver.Fail("DEADLINE_EXCEEDED", "the producer did not take the record before the deadline")
	}
	if !wait {
		return map[string]any{"queued": true, "seq": pend.seq}, nil
	}
	select {
	case err := <-pend.done:
		if err != nil {
			return nil, err
		}
		return delivered(msg), nil
	case <-timer.C:
		return nil, driver.Fail("DEADLINE_EXCEEDED", "no delivery result before the deadline")
	}
}

func (d *Driver) Flush(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.producer == nil && d.prodConf != nil && d.prodConf.Producer.Transaction.ID != "" {
		// Sarama builds a transactional producer in init_transactions (its InitProducerId runs
		// in the constructor): before that nothing can be outstanding, as with the other
		// clients' flush before initTransactions.
		return d.deliveries.Flushed()
	}
	if _, err := d.prod(true); err != nil {
		return nil, err
	}
	for !dl.Expired() {
		if _, pending := d.peekPending(); pending == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return d.deliveries.Flushed()
}

func (d *Driver) peekPending() (int, int) {
	done, pending := d.deliveries.Take()
	for _, r := range done {
		seq := r["seq"].(int64)
		delete(r, "seq")
		d.deliveries.Complete(seq, r)
	}
	return len(done), pending
}

// -- consume ---------------------------------------------------------------------------------------

// partition is one assigned partition: its consumer, its offset manager (auto-commit) and the
// next offset after the last record handed out.
type partition struct {
	topic string
	part  int32
	pc    sarama.PartitionConsumer
	pom   sarama.PartitionOffsetManager
	next  int64
}

func (d *Driver) consClientFor() (sarama.Client, error) {
	if d.consConf == nil {
		return nil, driver.NoConsumer()
	}
	if d.consClient == nil {
		cl, err := sarama.NewClient(d.consAddrs, d.consConf)
		if err != nil {
			return nil, err
		}
		d.consClient = cl
	}
	return d.consClient, nil
}

// assign records the partitions; the partition consumers start on the first op that reads
// (poll, position, commit), as Java's consumer resolves offsets on its first poll -- Sarama needs
// the cluster to start a partition consumer, an assignment does not.
func (d *Driver) Assign(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.consConf == nil {
		return nil, driver.NoConsumer()
	}
	if d.groupCons != nil {
		return nil, driver.Fail("ILLEGAL_STATE", "assign after subscribe")
	}
	tps, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	d.stopPartitions()
	d.assignment = tps
	return map[string]any{}, nil
}

// stopPartitions ends the partition consumers and the offset manager. A partition offset
// manager's Close waits until its OffsetManager releases it, which without auto-commit only the
// manager's own Close does: so each is closed asynchronously, then the manager.
func (d *Driver) stopPartitions() {
	for _, p := range d.parts {
		_ = p.pc.Close()
		if p.pom != nil {
			p.pom.AsyncClose()
		}
	}
	d.parts = nil
	if d.offsets != nil {
		_ = d.offsets.Close()
		d.offsets = nil
	}
}

// started starts the assigned partitions' consumers if they are not running yet.
func (d *Driver) started() error {
	if d.parts != nil || d.assignment == nil {
		return nil
	}
	cl, err := d.consClientFor()
	if err != nil {
		return err
	}
	if d.consumer == nil {
		if d.consumer, err = sarama.NewConsumerFromClient(cl); err != nil {
			return err
		}
	}
	if d.offsets == nil && d.group != "" {
		if d.offsets, err = sarama.NewOffsetManagerFromClient(d.group, cl); err != nil {
			return err
		}
	}
	parts := []*partition{}
	stop := func() {
		d.parts = parts
		d.stopPartitions()
	}
	for _, tp := range d.assignment {
		part := &partition{topic: tp.Topic, part: tp.Partition}
		start := d.consConf.Consumer.Offsets.Initial
		if d.offsets != nil {
			if part.pom, err = d.offsets.ManagePartition(tp.Topic, tp.Partition); err != nil {
				stop()
				return err
			}
			start, _ = part.pom.NextOffset() // the committed offset, else Offsets.Initial
		}
		if tp.Offset != nil {
			start = *tp.Offset
		}
		if start < 0 {
			if start, err = listOffset(cl, tp.Topic, tp.Partition, start,
				d.consConf.Consumer.IsolationLevel == sarama.ReadCommitted); err != nil {
				stop()
				return err
			}
		}
		if part.pc, err = d.consumer.ConsumePartition(tp.Topic, tp.Partition, start); err != nil {
			if part.pom != nil {
				part.pom.AsyncClose()
			}
			stop()
			return err
		}
		part.next = start
		parts = append(parts, part)
	}
	d.parts = parts
	return nil
}

func (d *Driver) Poll(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.consConf == nil {
		return nil, driver.NoConsumer()
	}
	if d.assignment == nil && d.groupCons == nil {
		return nil, driver.Fail("ILLEGAL_STATE", "poll before assign or subscribe")
	}
	max, window, err := driver.PollWindow(a, dl)
	if err != nil {
		return nil, err
	}
	records := []any{}
	var errs []any
	if d.groupCons != nil {
		return d.groupCons.poll(d, max, window)
	}
	// Not started yet (or the cluster was unreachable): keep trying within the window, as a Java
	// poll keeps connecting; what stopped the start is reported with the (empty) records.
	var startErr error
	for !window.Expired() {
		if startErr = d.started(); startErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if startErr != nil {
		return map[string]any{"records": records, "errors": []any{map[string]any{"error": d.Normalise(startErr, "poll")}}}, nil
	}
	for len(records) < max && !window.Expired() {
		got := false
		for _, p := range d.parts {
			select {
			case msg := <-p.pc.Messages():
				got = true
				records = append(records, row(msg))
				p.next = msg.Offset + 1
				if p.pom != nil && d.autoCommit {
					p.pom.MarkOffset(p.next, "")
				}
			case cerr := <-p.pc.Errors():
				got = true
				errs = append(errs, map[string]any{"topic": cerr.Topic, "partition": cerr.Partition,
					"error": d.Normalise(cerr.Err, "poll")})
			default:
			}
			if len(records) >= max {
				break
			}
		}
		if !got {
			time.Sleep(2 * time.Millisecond)
		}
	}
	return driver.Polled(records, errs), nil
}

func row(msg *sarama.ConsumerMessage) map[string]any {
	hs := make([]driver.Header, 0, len(msg.Headers))
	for _, h := range msg.Headers {
		hs = append(hs, driver.Header{Key: string(h.Key), Value: h.Value})
	}
	var ts *int64
	if !msg.Timestamp.IsZero() {
		t := msg.Timestamp.UnixMilli()
		ts = &t
	}
	return driver.RecordRow(msg.Topic, msg.Partition, msg.Offset, msg.Key, msg.Key == nil, msg.Value,
		msg.Value == nil, hs, ts)
}

// fetchOffset is the partition consumer's next fetch offset (Sarama's private
// partitionConsumer.offset): past transaction markers and aborted records it skipped.
func fetchOffset(pc sarama.PartitionConsumer) (off int64, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	v := reflect.ValueOf(pc).Elem().FieldByName("offset")
	return v.Int(), v.IsValid()
}

func (d *Driver) Position(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.consConf == nil {
		return nil, driver.NoConsumer()
	}
	tps, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	if d.groupCons != nil {
		return d.groupCons.position(tps)
	}
	if err := d.started(); err != nil {
		return nil, err
	}
	out := []any{}
	for _, tp := range tps {
		p := d.find(tp.Topic, tp.Partition)
		if p == nil {
			return nil, driver.NotAssigned(tp)
		}
		out = append(out, posRow(p))
	}
	if len(tps) == 0 {
		for _, p := range d.parts {
			out = append(out, posRow(p))
		}
	}
	return map[string]any{"positions": out}, nil
}

func posRow(p *partition) map[string]any {
	off := p.next
	if len(p.pc.Messages()) == 0 {
		if fetched, ok := fetchOffset(p.pc); ok && fetched > off && len(p.pc.Messages()) == 0 {
			off = fetched
		}
	}
	return map[string]any{"topic": p.topic, "partition": p.part, "offset": off}
}

func (d *Driver) find(topic string, part int32) *partition {
	for _, p := range d.parts {
		if p.topic == topic && p.part == part {
			return p
		}
	}
	return nil
}

func (d *Driver) coordinator() (*sarama.Broker, error) {
	cl, err := d.consClientFor()
	if err != nil {
		return nil, err
	}
	if d.group == "" {
		return nil, driver.Fail("INVALID_ARGUMENT", "the consumer has no group.id")
	}
	return cl.Coordinator(d.group)
}

func (d *Driver) Commit(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.consConf == nil {
		return nil, driver.NoConsumer()
	}
	tps, err := a.TopicPartitions("offsets")
	if err != nil {
		return nil, err
	}
	if d.groupCons != nil {
		return d.groupCons.commit(tps)
	}
	if err := d.started(); err != nil {
		return nil, err
	}
	if len(tps) == 0 {
		for _, p := range d.parts {
			next := p.next
			tps = append(tps, driver.TopicPartition{Topic: p.topic, Partition: p.part, Offset: &next})
		}
	}
	coord, err := d.coordinator()
	if err != nil {
		return nil, err
	}
	req := sarama.NewOffsetCommitRequest(d.consConf, d.group) // generation -1: not a group member
	for _, tp := range tps {
		meta := ""
		if tp.Metadata != nil {
			meta = *tp.Metadata
		}
		req.AddBlockWithLeaderEpoch(tp.Topic, tp.Partition, *tp.Offset, -1, 0, meta)
	}
	resp, err := coord.CommitOffset(req)
	if err != nil {
		return nil, err
	}
	for _, parts := range resp.Errors {
		for _, kerr := range parts {
			if kerr != sarama.ErrNoError {
				return nil, kerr
			}
		}
	}
	return map[string]any{}, nil
}

func (d *Driver) Committed(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	tps, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	coord, err := d.coordinator()
	if err != nil {
		return nil, err
	}
	byTopic := map[string][]int32{}
	for _, tp := range tps {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	req := sarama.NewOffsetFetchRequest(d.consConf.Version, d.group, byTopic)
	resp, err := coord.FetchOffset(req)
	if err != nil {
		return nil, err
	}
	if resp.Err != sarama.ErrNoError {
		return nil, resp.Err
	}
	out := []any{}
	for _, tp := range tps {
		r := map[string]any{"topic": tp.Topic, "partition": tp.Partition, "offset": nil, "metadata": nil}
		if b := resp.GetBlock(tp.Topic, tp.Partition); b != nil {
			if b.Err != sarama.ErrNoError {
				return nil, b.Err
			}
			if b.Offset >= 0 {
				r["offset"], r["metadata"] = b.Offset, b.Metadata
			}
		}
		out = append(out, r)
	}
	return map[string]any{"offsets": out}, nil
}

// -- group consumer (subscribe) --------------------------------------------------------------------

type groupConsumer struct {
	cg       sarama.ConsumerGroup
	cancel   context.CancelFunc
	messages chan claimed
	mu       sync.Mutex
	session  sarama.ConsumerGroupSession
	next     map[string]map[int32]int64
	errs     []error
}

// claimed is a record of a claim and the session (the group generation) that claimed it. Sarama
// rebalances in the background: a rebalance ends the session (its context is done) and revokes
// every claim, and the next session starts each partition it claims at the group's committed
// offset, so a record of an ended session is read again -- by this member or by the partition's
// new owner.
type claimed struct {
	msg  *sarama.ConsumerMessage
	sess sarama.ConsumerGroupSession
}

func (c claimed) live() bool { return c.sess.Context().Err() == nil }

func (g *groupConsumer) Setup(s sarama.ConsumerGroupSession) error {
	g.mu.Lock()
	g.session = s
	g.mu.Unlock()
	return nil
}

func (g *groupConsumer) Cleanup(sarama.ConsumerGroupSession) error {
	g.mu.Lock()
	g.session = nil
	g.mu.Unlock()
	return nil
}

func (g *groupConsumer) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	// The position starts again where the session starts the partition: the committed offset
	// (Sarama's initial-offset sentinel when none was committed: unknown until a record comes).
	g.mu.Lock()
	if g.next[claim.Topic()] == nil {
		g.next[claim.Topic()] = map[int32]int64{}
	}
	if off := claim.InitialOffset(); off >= 0 {
		g.next[claim.Topic()][claim.Partition()] = off
	} else {
		delete(g.next[claim.Topic()], claim.Partition())
	}
	g.mu.Unlock()
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			select {
			case g.messages <- claimed{msg, s}:
			case <-s.Context().Done():
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (g *groupConsumer) currentSession() sarama.ConsumerGroupSession {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.session
}

func (g *groupConsumer) close() {
	g.cancel()
	_ = g.cg.Close()
}

func (d *Driver) Subscribe(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.consConf == nil {
		return nil, driver.NoConsumer()
	}
	if d.group == "" {
		return nil, driver.Fail("INVALID_ARGUMENT", "subscribe needs group.id")
	}
	if d.assignment != nil {
		return nil, driver.Fail("ILLEGAL_STATE", "subscribe after assign")
	}
	topics, err := a.Strings("topics")
	if err != nil {
		return nil, err
	}
	cl, err := d.consClientFor()
	if err != nil {
		return nil, err
	}
	cg, err := sarama.NewConsumerGroupFromClient(d.group, cl)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupConsumer{cg: cg, cancel: cancel, messages: make(chan claimed),
		next: map[string]map[int32]int64{}}
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, topics, g); err != nil {
				g.mu.Lock()
				g.errs = append(g.errs, err)
				g.mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	go func() {
		for err := range cg.Errors() {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
		}
	}()
	d.groupCons = g
	return map[string]any{}, nil
}

// poll gathers records until max or the window ends. A record whose session ended meanwhile is
// dropped, and never marked: the group rebalanced and took its partition (Sarama ends the session
// on every rebalance and revokes every claim), the next session reads it again from the committed
// offset, and returning both would hand it out twice (a copier would copy it twice). What one poll
// returns is then of one session -- one generation -- as one KafkaConsumer.poll() is. The
// positions (and, with enable.auto.commit, the marks) are those of the records returned.
func (g *groupConsumer) poll(d *Driver, max int, window driver.Deadline) (map[string]any, error) {
	got := []claimed{}
	timer := time.NewTimer(window.Remaining())
	defer timer.Stop()
loop:
	for {
		// A session ends as a whole: got is filtered when a record of another session comes and
		// when it is full (records of an ended session do not count), not at every record.
		if len(got) >= max {
			if got = liveOnly(got); len(got) >= max {
				break
			}
		}
		select {
		case c := <-g.messages:
			if n := len(got); n > 0 && got[n-1].sess != c.sess {
				got = liveOnly(got)
			}
			got = append(got, c)
		case <-timer.C:
			break loop
		}
	}
	got = liveOnly(got)
	records := []any{}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range got {
		records = append(records, row(c.msg))
		if g.next[c.msg.Topic] == nil {
			g.next[c.msg.Topic] = map[int32]int64{}
		}
		g.next[c.msg.Topic][c.msg.Partition] = c.msg.Offset + 1
		if d.autoCommit {
			c.sess.MarkMessage(c.msg, "")
		}
	}
	data := map[string]any{"records": records}
	if len(g.errs) > 0 {
		errs := []any{}
		for _, err := range g.errs {
			errs = append(errs, map[string]any{"error": d.Normalise(err, "poll")})
		}
		data["errors"] = errs
		g.errs = nil
	}
	return data, nil
}

// liveOnly keeps the records whose session is still running, in their order.
func liveOnly(got []claimed) []claimed {
	kept := got[:0]
	for _, c := range got {
		if c.live() {
			kept = append(kept, c)
		}
	}
	return kept
}

func (g *groupConsumer) position(tps []driver.TopicPartition) (map[string]any, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []any{}
	for _, tp := range tps {
		off, ok := g.next[tp.Topic][tp.Partition]
		if !ok {
			return nil, driver.Fail("ILLEGAL_STATE", "no position for %s-%d yet", tp.Topic, tp.Partition)
		}
		out = append(out, map[string]any{"topic": tp.Topic, "partition": tp.Partition, "offset": off})
	}
	return map[string]any{"positions": out}, nil
}

func (g *groupConsumer) commit(tps []driver.TopicPartition) (map[string]any, error) {
	s := g.currentSession()
	if s == nil {
		return nil, driver.Fail("ILLEGAL_STATE", "the group consumer has no session (not joined yet)")
	}
	g.mu.Lock()
	if len(tps) == 0 {
		for topic, parts := range g.next {
			for p, off := range parts {
				s.MarkOffset(topic, p, off, "")
			}
		}
	}
	g.mu.Unlock()
	for _, tp := range tps {
		meta := ""
		if tp.Metadata != nil {
			meta = *tp.Metadata
		}
		s.ResetOffset(tp.Topic, tp.Partition, *tp.Offset, meta)
	}
	s.Commit()
	return map[string]any{}, nil
}

// -- admin -----------------------------------------------------------------------------------------

// listOffset asks the partition leader for an offset (sarama.OffsetOldest/OffsetNewest or a
// timestamp) at the isolation level.
func listOffset(cl sarama.Client, topic string, part int32, at int64, readCommitted bool) (int64, error) {
	off, _, err := listOffsetTs(cl, topic, part, at, readCommitted)
	return off, err
}

func listOffsetTs(cl sarama.Client, topic string, part int32, at int64, readCommitted bool) (int64, int64, error) {
	leader, err := cl.Leader(topic, part)
	if err != nil {
		return 0, 0, err
	}
	req := sarama.NewOffsetRequest(cl.Config().Version) // the version Sarama's own consumer sends
	if readCommitted {
		req.IsolationLevel = sarama.ReadCommitted
	}
	req.AddBlock(topic, part, at, 1)
	resp, err := leader.GetAvailableOffsets(req)
	if err != nil {
		return 0, 0, err
	}
	b := resp.GetBlock(topic, part)
	if b == nil {
		return 0, 0, sarama.ErrIncompleteResponse
	}
	if b.Err != sarama.ErrNoError {
		return 0, 0, b.Err
	}
	return b.Offset, b.Timestamp, nil
}

func (d *Driver) ListOffsets(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cl, err := d.adminClient(dl)
	if err != nil {
		return nil, err
	}
	tps, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	spec, ts, err := a.OffsetSpec()
	if err != nil {
		return nil, err
	}
	at := map[string]int64{"earliest": sarama.OffsetOldest, "latest": sarama.OffsetNewest, "timestamp": ts}[spec]
	out := []any{}
	for _, tp := range tps {
		row := map[string]any{"topic": tp.Topic, "partition": tp.Partition}
		var off, stamp int64
		driver.RetryRead(dl, func() bool {
			off, stamp, err = listOffsetTs(cl, tp.Topic, tp.Partition, at, a.ReadCommitted())
			if err == nil || !worthRetrying(err) {
				return false
			}
			_ = cl.RefreshMetadata(tp.Topic) // the leader may have moved
			return true
		})
		if err != nil {
			row["error"] = d.Normalise(err, "list_offsets")
		} else {
			row["offset"], row["timestamp_ms"] = off, nil
			if stamp >= 0 {
				row["timestamp_ms"] = stamp
			}
		}
		out = append(out, row)
	}
	return map[string]any{"offsets": out}, nil
}

func (d *Driver) CreateTopics(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cl, err := d.adminClient(dl)
	if err != nil {
		return nil, err
	}
	topics, err := driver.NewTopics(a)
	if err != nil {
		return nil, err
	}
	adm, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, t := range topics {
		err := adm.CreateTopic(t.Name, &sarama.TopicDetail{NumPartitions: t.Partitions,
			ReplicationFactor: t.ReplicationFactor, ConfigEntries: t.Configs}, false)
		out = append(out, driver.TopicResult(t.Name, err, d.Normalise))
	}
	return map[string]any{"topics": out}, nil
}

func (d *Driver) DescribeTransactions(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cl, err := d.adminClient(dl)
	if err != nil {
		return nil, err
	}
	ids, err := a.Strings("ids")
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, id := range ids {
		row := map[string]any{"transactional_id": id}
		coord, err := cl.TransactionCoordinator(id)
		var resp *sarama.DescribeTransactionsResponse
		if err == nil {
			resp, err = coord.DescribeTransactions(&sarama.DescribeTransactionsRequest{TransactionalIDs: []string{id}})
		}
		if err == nil && len(resp.TransactionStates) == 0 {
			err = sarama.ErrIncompleteResponse
		}
		if err != nil {
			row["error"] = d.Normalise(err, "describe_transactions")
			out = append(out, row)
			continue
		}
		st := resp.TransactionStates[0]
		if st.ErrorCode != sarama.ErrNoError {
			row["error"] = d.Normalise(st.ErrorCode, "describe_transactions")
			out = append(out, row)
			continue
		}
		parts := map[string][]int32{}
		for _, t := range st.Topics {
			parts[t.Topic] = append(parts[t.Topic], t.Partitions...)
		}
		row["state"], row["producer_id"], row["producer_epoch"] = st.TransactionState, st.ProducerID, st.ProducerEpoch
		row["timeout_ms"], row["coordinator_id"] = st.TransactionTimeout.Milliseconds(), coord.ID()
		row["partitions"] = driver.PartitionRows(parts)
		out = append(out, row)
	}
	return map[string]any{"transactions": out}, nil
}

func (d *Driver) DescribeProducers(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	cl, err := d.adminClient(dl)
	if err != nil {
		return nil, err
	}
	parts, err := a.TopicPartitions("partitions")
	if err != nil {
		return nil, err
	}
	out := []any{}
	for _, tp := range parts {
		row := map[string]any{"topic": tp.Topic, "partition": tp.Partition}
		leader, err := cl.Leader(tp.Topic, tp.Partition)
		var resp *sarama.DescribeProducersResponse
		if err == nil {
			resp, err = leader.DescribeProducers(&sarama.DescribeProducersRequest{
				Topics: []sarama.DescribeProducersRequestTopic{{Name: tp.Topic, PartitionIndexes: []int32{tp.Partition}}}})
		}
		if err == nil && (len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0) {
			err = sarama.ErrIncompleteResponse
		}
		if err != nil {
			row["error"] = d.Normalise(err, "describe_producers")
			out = append(out, row)
			continue
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != sarama.ErrNoError {
			row["error"] = d.Normalise(p.ErrorCode, "describe_producers")
			out = append(out, row)
			continue
		}
		producers := []any{}
		for _, s := range p.ActiveProducers {
			producers = append(producers, driver.ProducerRow(s.ProducerID, s.ProducerEpoch, s.LastSequence,
				s.LastTimestamp, s.CoordinatorEpoch, s.CurrentTxnStartOffset))
		}
		row["producers"] = producers
		out = append(out, row)
	}
	return map[string]any{"partitions": out}, nil
}

// -- errors ----------------------------------------------------------------------------------------

// localNames: Sarama's own errors that have a counterpart in the protocol's vocabulary.
var localNames = []struct {
	err  error
	name string
}{
	{sarama.ErrOutOfBrokers, "NETWORK_EXCEPTION"},
	{sarama.ErrNotConnected, "NETWORK_EXCEPTION"},
	{sarama.ErrClosedClient, "ILLEGAL_STATE"},
	{sarama.ErrShuttingDown, "ILLEGAL_STATE"},
	{sarama.ErrTransactionNotReady, "ILLEGAL_STATE"},
	{sarama.ErrNonTransactedProducer, "ILLEGAL_STATE"},
	{sarama.ErrTransitionNotAllowed, "ILLEGAL_STATE"},
	{sarama.ErrInvalidPartition, "UNKNOWN_TOPIC_OR_PARTITION"},
}

var sentinelNames = map[error]string{
	sarama.ErrOutOfBrokers: "ErrOutOfBrokers", sarama.ErrNotConnected: "ErrNotConnected",
	sarama.ErrClosedClient: "ErrClosedClient", sarama.ErrShuttingDown: "ErrShuttingDown",
	sarama.ErrTransactionNotReady: "ErrTransactionNotReady", sarama.ErrNonTransactedProducer: "ErrNonTransactedProducer",
	sarama.ErrTransitionNotAllowed: "ErrTransitionNotAllowed", sarama.ErrInvalidPartition: "ErrInvalidPartition",
	sarama.ErrAddPartitionsToTxn: "ErrAddPartitionsToTxn", sarama.ErrTxnOffsetCommit: "ErrTxnOffsetCommit",
	sarama.ErrTxnUnableToParseResponse: "ErrTxnUnableToParseResponse",
}

// worthRetrying: a transport failure or a Kafka error Kafka classifies retriable (Sarama has no
// such notion of its own).
func worthRetrying(err error) bool {
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		return driver.RetriableCode(int16(kerr))
	}
	return true
}

func className(err error) string {
	for sentinel, name := range sentinelNames {
		if err == sentinel {
			return "sarama." + name
		}
	}
	if _, ok := err.(sarama.KError); ok {
		return "sarama.KError"
	}
	return driver.TypeName(err)
}

// Normalise: the Kafka code where Sarama has one, else its sentinel errors by name; the flags are
// the producer's TxnStatus (see the package doc).
func (d *Driver) Normalise(err error, op string) driver.ErrorInfo {
	var perr *sarama.ProducerError
	if errors.As(err, &perr) && perr.Err != nil {
		err = perr.Err
	}
	var info driver.ErrorInfo
	var kerr sarama.KError
	var cfgErr sarama.ConfigurationError
	switch {
	case errors.As(err, &kerr):
		info = driver.FromCode(int16(kerr), err.Error(), className(err))
		if className(err) != "sarama.KError" {
			info.CauseClass = "sarama.KError"
		}
	case errors.As(err, &cfgErr):
		info = driver.Local("INVALID_ARGUMENT", err.Error(), "sarama.ConfigurationError")
	default:
		info = driver.Local("CLIENT_ERROR", err.Error(), className(err))
		for _, l := range localNames {
			if errors.Is(err, l.err) {
				info = driver.Local(l.name, err.Error(), className(l.err))
				break
			}
		}
		var ne net.Error
		if info.Name == "CLIENT_ERROR" && errors.As(err, &ne) {
			info.Name, info.Code = "NETWORK_EXCEPTION", driver.KafkaCode("NETWORK_EXCEPTION")
		}
	}
	info.Fenced = info.Name == "PRODUCER_FENCED"
	if info.Extra == nil {
		info.Extra = map[string]any{}
	}
	info.Extra["retriable_known"] = false
	if driver.ProducerOps[op] && d.producer == nil && d.prodConf != nil && d.prodConf.Producer.Transaction.ID != "" {
		info.Extra["state_read"] = false // NewAsyncProducer failed: no producer whose TxnStatus to read
	}
	if driver.ProducerOps[op] && d.producer != nil && d.producer.IsTransactional() {
		status := d.producer.TxnStatus()
		info.Abortable = status&sarama.ProducerTxnFlagAbortableError != 0
		info.Fatal = status&sarama.ProducerTxnFlagFatalError != 0
		info.Extra["txn_status"] = status.String()
	}
	if errors.As(err, &kerr) {
		info.Extra["client_code"] = int(kerr)
	}
	return info
}
