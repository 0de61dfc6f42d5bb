package franzgo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kconform/clients/go/internal/driver"
)

// eosLoopCloseSlack is kept from the op's budget for the last End and the clients' close: the
// loop takes no new transaction after duration_ms or past (deadline - this).
const eosLoopCloseSlack = 5 * time.Second

// EosLoop (optional op eos_loop) runs franz-go's own exactly-once loop, as an application built
// on kgo.GroupTransactSession does (franz-go v1.22.2, kgo/txn.go): one client that is both the
// group member and the transactional producer; per transaction PollRecords, Begin, one Produce per
// record, End(TryCommit) -- End flushes, commits the consumed offsets with TxnOffsetCommit,
// heartbeats, and aborts instead when the group rebalanced (revoke/lost) since Begin.
//
// The session is built from the actor's own configs: create_producer's (transactional.id, ...)
// and create_consumer's (group.id, partition.assignment.strategy, group.instance.id,
// isolation.level, ...), subscribed to the topics subscribe was given (the actor's inputs). It
// takes the place of the actor's clients for the loop (the group member leaves, the session's
// InitProducerId bumps the producer's epoch) and gives it back after: the session is closed and a
// fresh producer and group consumer are made from the same configs, as the runner set them up.
//
// Each polled data record is copied to `to` with its key, value and headers plus the header
// kconform-src = "topic:partition:offset". Every abort_every-th transaction (1-based; 0 = none)
// is ended with TryAbort. The loop stops after max_transactions (0 = no limit) or duration_ms.
// data: {transactions: [{consumed: [{topic, partition, offset}], produced, requested, end, outcome,
// t_start_ms, t_end_ms}], errors: [normalised errors: fetch, produce, End]} -- `end` is what the
// session did ("commit", or "abort": asked for, or a rebalance since Begin), `outcome` "ok" or
// End's error name. An End error leaves the loop only when the producer id is then in a fatal
// state (maybeRecoverProducerID's rule, classify below), as is a Begin error: the op fails with
// that error, which carries the same `transactions` and `errors`.
func (d *Driver) EosLoop(a driver.Args, dl driver.Deadline) (map[string]any, error) {
	if d.producer == nil || !d.txnal {
		return nil, driver.Fail("ILLEGAL_STATE", "eos_loop needs a transactional producer (create_producer with transactional.id)")
	}
	if d.consumerOpts == nil {
		return nil, driver.NoConsumer()
	}
	if !d.grouped || len(d.subscribed) == 0 {
		return nil, driver.Fail("ILLEGAL_STATE", "eos_loop needs a group consumer subscribed to the inputs (an actor with inputs and a group.id, not assign)")
	}
	to := a.Str("to")
	if to == "" {
		return nil, driver.Fail("INVALID_ARGUMENT", "eos_loop needs `to`, the output topic")
	}
	durationMs, err := a.Int("duration_ms", 10_000)
	if err != nil {
		return nil, err
	}
	maxTxns, err := a.Int("max_transactions", 0)
	if err != nil {
		return nil, err
	}
	maxRecords, err := a.Int("max_records", 500)
	if err != nil {
		return nil, err
	}
	abortEvery, err := a.Int("abort_every", 0)
	if err != nil {
		return nil, err
	}
	if durationMs < 0 || maxTxns < 0 || maxRecords <= 0 || abortEvery < 0 {
		return nil, driver.Fail("INVALID_ARGUMENT", "duration_ms, max_transactions, abort_every >= 0 and max_records > 0")
	}

	popts, err := d.producerOpts(driver.NewConfig(d.producerCfg))
	if err != nil {
		return nil, err
	}
	group := append(append([]kgo.Opt{}, d.consumerOpts...), kgo.ConsumerGroup(d.group), kgo.ConsumeTopics(d.subscribed...))
	d.consumer.Close()
	d.producer.Close()
	sess, err := kgo.NewGroupTransactSession(append(append([]kgo.Opt{}, popts...), group...)...)
	if err != nil {
		return nil, err
	}
	d.producer = sess.Client() // Normalise reads the session's transactional state
	defer func() {
		sess.Close()
		d.producer, d.consumer = nil, nil
		if cl, err := kgo.NewClient(popts...); err == nil {
			d.producer = cl
		}
		if cl, err := kgo.NewClient(group...); err == nil {
			d.consumer = cl
		}
	}()

	ctx, cancel := ctxFor(dl)
	defer cancel()
	stop := time.Now().Add(time.Duration(durationMs) * time.Millisecond)
	if latest := dl.End.Add(-eosLoopCloseSlack); latest.Before(stop) {
		stop = latest
	}
	var mu sync.Mutex // produce promises run on franz-go's goroutines
	txns := []map[string]any{}
	errs := []driver.ErrorInfo{}
	note := func(err error, op string, where map[string]any) {
		info := d.Normalise(err, op)
		for k, v := range where {
			info = info.With(k, v)
		}
		mu.Lock()
		errs = append(errs, info)
		mu.Unlock()
	}
	result := func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return map[string]any{"transactions": txns, "errors": append([]driver.ErrorInfo{}, errs...)}
	}
	fatal := func(err error, op string) error {
		info := d.Normalise(err, op)
		for k, v := range result() {
			info = info.With(k, v)
		}
		return driver.Reported(info)
	}

	for (maxTxns == 0 || int64(len(txns)) < maxTxns) && time.Now().Before(stop) {
		pctx, pcancel := context.WithTimeout(ctx, driver.PollStep)
		fetches := sess.PollRecords(pctx, int(maxRecords))
		pcancel()
		if fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				note(err, "poll", map[string]any{"topic": t, "partition": p})
			}
		})
		var records []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() { // the consumer keeps control records (KeepControlRecords) for position
				records = append(records, r)
			}
		})
		if len(records) == 0 {
			continue
		}
		n := len(txns) + 1
		requested := "commit"
		if abortEvery > 0 && int64(n)%abortEvery == 0 {
			requested = "abort"
		}
		txn := map[string]any{"t_start_ms": time.Now().UnixMilli(), "requested": requested}
		if err := sess.Begin(); err != nil {
			return nil, fatal(err, "begin_transaction")
		}
		consumed := make([]map[string]any, 0, len(records))
		for _, r := range records {
			consumed = append(consumed, map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset})
			headers := append(append([]kgo.RecordHeader{}, r.Headers...), kgo.RecordHeader{
				Key: "kconform-src", Value: fmt.Appendf(nil, "%s:%d:%d", r.Topic, r.Partition, r.Offset)})
			src := map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset}
			sess.Produce(ctx, &kgo.Record{Topic: to, Key: r.Key, Value: r.Value, Headers: headers}, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, kgo.ErrAborting) {
					note(err, "send", map[string]any{"source": src})
				}
			})
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(requested == "commit"))
		txn["consumed"], txn["produced"], txn["t_end_ms"] = consumed, len(records), time.Now().UnixMilli()
		txn["end"], txn["outcome"] = "abort", "ok"
		if committed {
			txn["end"] = "commit"
		}
		if err != nil {
			txn["outcome"] = d.Normalise(err, "commit_transaction").Name
		}
		mu.Lock()
		txns = append(txns, txn)
		mu.Unlock()
		if err != nil {
			note(err, "commit_transaction", map[string]any{"transaction": n})
			if _, dead := readState(sess.Client()).classify(); dead {
				return nil, fatal(err, "commit_transaction")
			}
		}
	}
	return result(), nil
}
