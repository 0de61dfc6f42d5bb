package driver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Args are a request's arguments (everything but id, op and deadline_ms).
type Args map[string]any

func decodeJSON(raw []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(into)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		return int64(n), n == float64(int64(n))
	case int:
		return int64(n), true
	case int64:
		return n, true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// Has says whether the argument is present and not null.
func (a Args) Has(key string) bool { return a[key] != nil }

// Str is a string argument ("" when absent).
func (a Args) Str(key string) string {
	s, _ := a[key].(string)
	return s
}

// StrOr is a string argument or def when absent.
func (a Args) StrOr(key, def string) string {
	if s, ok := a[key].(string); ok {
		return s
	}
	return def
}

// Int is an integer argument or def when absent; a non-integer is INVALID_ARGUMENT.
func (a Args) Int(key string, def int64) (int64, error) {
	v, ok := a[key]
	if !ok || v == nil {
		return def, nil
	}
	if i, ok := asInt(v); ok {
		return i, nil
	}
	return 0, Fail("INVALID_ARGUMENT", "%s must be an integer, got %v", key, v)
}

// OptInt is an integer argument or nil when absent.
func (a Args) OptInt(key string) (*int64, error) {
	if !a.Has(key) {
		return nil, nil
	}
	i, err := a.Int(key, 0)
	return &i, err
}

// Bool is a boolean argument or def when absent.
func (a Args) Bool(key string, def bool) bool {
	if b, ok := a[key].(bool); ok {
		return b
	}
	return def
}

// Objects is a list-of-objects argument (offsets, partitions, topics).
func (a Args) Objects(key string) ([]Args, error) {
	raw, ok := a[key].([]any)
	if !ok {
		if a[key] == nil {
			return nil, nil
		}
		return nil, Fail("INVALID_ARGUMENT", "%s must be a list", key)
	}
	out := make([]Args, 0, len(raw))
	for _, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, Fail("INVALID_ARGUMENT", "%s items must be objects, got %v", key, item)
		}
		out = append(out, Args(m))
	}
	return out, nil
}

// Strings is a list-of-strings argument (topics, ids).
func (a Args) Strings(key string) ([]string, error) {
	raw, _ := a[key].([]any)
	out := make([]string, 0, len(raw))
	for _, item := range raw {
		s, ok := item.(string)
		if !ok {
			return nil, Fail("INVALID_ARGUMENT", "%s items must be strings, got %v", key, item)
		}
		out = append(out, s)
	}
	return out, nil
}

// Object is an object argument (config).
func (a Args) Object(key string) Args {
	m, _ := a[key].(map[string]any)
	return Args(m)
}

// TopicPartition is {topic, partition} (+ offset, metadata where the op has them).
type TopicPartition struct {
	Topic     string
	Partition int32
	Offset    *int64
	Metadata  *string
}

// TopicPartitions reads a list of {topic, partition, offset?, metadata?}.
func (a Args) TopicPartitions(key string) ([]TopicPartition, error) {
	items, err := a.Objects(key)
	if err != nil {
		return nil, err
	}
	out := make([]TopicPartition, 0, len(items))
	for _, item := range items {
		p, err := item.Int("partition", -1)
		if err != nil {
			return nil, err
		}
		tp := TopicPartition{Topic: item.Str("topic"), Partition: int32(p)}
		if tp.Topic == "" || p < 0 {
			return nil, Fail("INVALID_ARGUMENT", "%s: every item needs a topic and a partition: %v", key, map[string]any(item))
		}
		if tp.Offset, err = item.OptInt("offset"); err != nil {
			return nil, err
		}
		if m, ok := item["metadata"].(string); ok {
			tp.Metadata = &m
		}
		out = append(out, tp)
	}
	return out, nil
}

// Payload decodes a key/value/header payload: null, a UTF-8 string, or {"base64": ...}.
// isNull distinguishes null from an empty value.
func Payload(v any) (raw []byte, isNull bool, err error) {
	switch p := v.(type) {
	case nil:
		return nil, true, nil
	case string:
		return []byte(p), false, nil
	case map[string]any:
		if b64, ok := p["base64"].(string); ok && len(p) == 1 {
			raw, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return nil, false, Fail("INVALID_ARGUMENT", "bad base64 payload: %v", err)
			}
			return raw, false, nil
		}
	}
	return nil, false, Fail("INVALID_ARGUMENT", "payload must be null, a string or {\"base64\": ...}, got %v", v)
}

// Header is one record header, its value nil for a null value.
type Header struct {
	Key   string
	Value []byte
}

// Headers reads [[name, payload], ...].
func (a Args) Headers() ([]Header, error) {
	raw, _ := a["headers"].([]any)
	out := make([]Header, 0, len(raw))
	for _, item := range raw {
		pair, ok := item.([]any)
		if !ok || len(pair) != 2 {
			return nil, Fail("INVALID_ARGUMENT", "headers must be [[name, value], ...], got %v", item)
		}
		name, ok := pair[0].(string)
		if !ok {
			return nil, Fail("INVALID_ARGUMENT", "header name must be a string, got %v", pair[0])
		}
		value, _, err := Payload(pair[1])
		if err != nil {
			return nil, err
		}
		out = append(out, Header{name, value})
	}
	return out, nil
}

// Encode is the inverse of Payload: nil -> null, valid UTF-8 -> string, else {"base64": ...}.
func Encode(raw []byte, isNull bool) any {
	if isNull {
		return nil
	}
	if utf8.Valid(raw) {
		return string(raw)
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString(raw)}
}

// RecordRow is one consumed record as poll answers it.
func RecordRow(topic string, partition int32, offset int64, key []byte, keyNull bool, value []byte,
	valueNull bool, headers []Header, timestampMs *int64) map[string]any {
	hs := make([]any, 0, len(headers))
	for _, h := range headers {
		hs = append(hs, []any{h.Key, Encode(h.Value, h.Value == nil)})
	}
	var ts any
	if timestampMs != nil && *timestampMs >= 0 {
		ts = *timestampMs
	}
	return map[string]any{"topic": topic, "partition": partition, "offset": offset,
		"key": Encode(key, keyNull), "value": Encode(value, valueNull), "headers": hs, "timestamp_ms": ts}
}

// Deliveries keeps the results of send(wait=false) for the next flush.
type Deliveries struct {
	mu          sync.Mutex
	next        int64
	outstanding map[int64]bool
	done        []map[string]any
}

// New reserves a sequence number for a queued send.
func (d *Deliveries) New() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.outstanding == nil {
		d.outstanding = map[int64]bool{}
	}
	d.next++
	d.outstanding[d.next] = true
	return d.next
}

// Complete records the result of send seq.
func (d *Deliveries) Complete(seq int64, result map[string]any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.outstanding, seq)
	result["seq"] = seq
	d.done = append(d.done, result)
}

// Take hands out the completed results (by seq) and how many are still outstanding.
func (d *Deliveries) Take() ([]map[string]any, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	done := d.done
	d.done = nil
	sort.Slice(done, func(i, j int) bool { return done[i]["seq"].(int64) < done[j]["seq"].(int64) })
	if done == nil {
		done = []map[string]any{}
	}
	return done, len(d.outstanding)
}

// Flushed answers flush: the deliveries, or DEADLINE_EXCEEDED with them when some are pending.
func (d *Deliveries) Flushed() (map[string]any, error) {
	done, pending := d.Take()
	if pending > 0 {
		info := DriverError("DEADLINE_EXCEEDED", fmt.Sprintf("%d records undelivered at the deadline", pending))
		return nil, Reported(info.With("deliveries", done).With("pending", pending))
	}
	return map[string]any{"deliveries": done}, nil
}

// Config is a create_* config: Java property names, values as strings, each key taken once by
// the driver's mapping; Rest names what no mapping took.
type Config struct {
	values map[string]string
	taken  map[string]bool
}

// NewConfig reads a config object; scalar JSON values become their Java-properties spelling.
func NewConfig(obj Args) Config {
	c := Config{values: map[string]string{}, taken: map[string]bool{}}
	for k, v := range obj {
		switch t := v.(type) {
		case string:
			c.values[k] = t
		case nil:
			c.values[k] = ""
		default:
			c.values[k] = fmt.Sprint(t)
		}
	}
	return c
}

// Take returns a key's value and marks it mapped.
func (c Config) Take(key string) (string, bool) {
	v, ok := c.values[key]
	if ok {
		c.taken[key] = true
	}
	return v, ok
}

// Peek reads a key without marking it mapped.
func (c Config) Peek(key string) (string, bool) {
	v, ok := c.values[key]
	return v, ok
}

// Apply runs each mapping whose key is present; a value a mapping refuses, or a key no
// mapping takes, is INVALID_ARGUMENT naming the key.
func (c Config) Apply(mappings map[string]func(string) error) error {
	keys := make([]string, 0, len(mappings))
	for k := range mappings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if v, ok := c.Take(key); ok {
			if err := mappings[key](v); err != nil {
				var unsupported *OpError // a setting this release of the library cannot do, as it said
				if errors.As(err, &unsupported) && unsupported.Info.Name == "UNSUPPORTED_BY_CLIENT" {
					return err
				}
				return Fail("INVALID_ARGUMENT", "config %s=%q: %v", key, v, err)
			}
		}
	}
	var rest []string
	for k := range c.values {
		if !c.taken[k] {
			rest = append(rest, k)
		}
	}
	if len(rest) > 0 {
		sort.Strings(rest)
		return Fail("INVALID_ARGUMENT", "config keys this driver cannot map to the client: %s", strings.Join(rest, ", "))
	}
	return nil
}

// Millis parses a Java *.ms value.
func Millis(v string) (int64, error) {
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a number of milliseconds")
	}
	return ms, nil
}

// Flag parses a Java boolean value.
func Flag(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("not true or false")
}

// Servers splits bootstrap.servers.
func Servers(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// OffsetSpec is list_offsets' spec: earliest, latest or timestamp (with timestamp_ms).
func (a Args) OffsetSpec() (spec string, ts int64, err error) {
	spec = a.StrOr("spec", "latest")
	switch spec {
	case "earliest", "latest":
		return spec, 0, nil
	case "timestamp":
		ts, err = a.Int("timestamp_ms", 0)
		return spec, ts, err
	}
	return "", 0, Fail("INVALID_ARGUMENT", "spec must be earliest|latest|timestamp, not %q", spec)
}

// ReadCommitted says whether list_offsets asks at read_committed (default read_uncommitted).
func (a Args) ReadCommitted() bool {
	return a.StrOr("isolation_level", "read_uncommitted") == "read_committed"
}

// ClientID is create_*'s answer: the config's client.id, null when the case set none.
func ClientID(cfg Config) any {
	if id, ok := cfg.Peek("client.id"); ok {
		return id
	}
	return nil
}

// JavaAssignors are Java's built-in assignor classes -- the values partition.assignment.strategy
// takes -- and the JoinGroup protocol name each sends. Members of different clients share a
// group when they offer one protocol name, so a driver maps a name onto its library's balancer
// of that name or refuses it. Java loads the class named and knows no short name.
var JavaAssignors = map[string]string{
	"org.apache.kafka.clients.consumer.RangeAssignor":             "range",
	"org.apache.kafka.clients.consumer.RoundRobinAssignor":        "roundrobin",
	"org.apache.kafka.clients.consumer.StickyAssignor":            "sticky",
	"org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

// AssignorNames reads partition.assignment.strategy as Java does -- class names separated by
// commas, blanks around them trimmed, an empty element refused, a repeated one dropped -- as
// protocol names in preference order. A class outside JavaAssignors and an empty list (Java
// refuses it at subscribe) are errors; Config.Apply names the key and the value.
func AssignorNames(v string) ([]string, error) {
	text := strings.TrimSpace(v)
	if text == "" {
		return nil, fmt.Errorf("no assignor (Java fails subscribe with 'Must configure at least one partition assigner')")
	}
	var names []string
	seen := map[string]bool{}
	for _, item := range strings.Split(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("values must not be empty (Java's ConfigException)")
		}
		name, ok := JavaAssignors[item]
		if !ok {
			known := make([]string, 0, len(JavaAssignors))
			for k := range JavaAssignors {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("%q is not one of Java's assignor classes %v", item, known)
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names, nil
}
