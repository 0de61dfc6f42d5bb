// Package driver is the library-independent half of kconform's Go client drivers (franz-go and
// Sarama): the JSON-lines serve loop, op deadlines, payload encoding, the bookkeeping of
// un-awaited sends, Java-style config parsing and Kafka's error table by code.
//
// Why one package: both drivers answer the same protocol (conformance/clients/protocol.py), so
// everything that does not touch a client library lives here once, and a driver is only the
// mapping of each op onto its library. The loop mirrors the Python drivers' driver.py: every op
// runs on its own goroutine and the loop waits for it until the op's deadline plus
// LibrarySlack, then answers DEADLINE_EXCEEDED and leaves the call running -- so a library call
// that takes no deadline of its own still gets an answer in time.
package driver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// ProtocolVersion is the driver protocol's version (protocol.PROTOCOL_VERSION).
const ProtocolVersion = 1

// LibrarySlack is how long past an op's deadline the loop still waits for the library's own
// answer: library timeouts are not exact, and an answer a few ms late is still the library's.
const LibrarySlack = 500 * time.Millisecond

// PollStep bounds one library poll inside the poll op, so the op keeps to its window.
const PollStep = 200 * time.Millisecond

// Op runs one request: it returns the reply's data, or an error that Normalise turns into the
// reply's error object.
type Op func(args Args, d Deadline) (map[string]any, error)

// Library is what a driver supplies: its ops, and how its errors read in Kafka's vocabulary.
type Library interface {
	// Hello is the library-specific part of hello's data (client, library, versions).
	Hello() map[string]any
	// Ops maps each implemented op (ops.yaml names) to its function; hello lists exactly these.
	Ops() map[string]Op
	// Unsupported names ops of the definition the library cannot do, with why.
	Unsupported() map[string]string
	// Normalise turns an error a library call returned during op into the protocol's error.
	Normalise(err error, op string) ErrorInfo
}

// Serve answers requests from in until it closes; replies go to out, one line each.
func Serve(lib Library, in io.Reader, out io.Writer) error {
	ops := lib.Ops()
	ops["hello"] = func(Args, Deadline) (map[string]any, error) {
		data := lib.Hello()
		names := make([]string, 0, len(ops))
		for name := range ops {
			names = append(names, name)
		}
		sort.Strings(names)
		data["language"] = "go"
		data["protocol"] = ProtocolVersion
		data["pid"] = os.Getpid()
		data["ops"] = names
		return data, nil
	}
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(line) == 0 {
			continue
		}
		if err := enc.Encode(handle(lib, ops, line)); err != nil {
			return err
		}
	}
	return scanner.Err()
}

// reply is one answer line: data on success, error on failure (never both).
type reply struct {
	ID    any
	OK    bool
	Data  map[string]any
	Error *ErrorInfo
}

func (r reply) MarshalJSON() ([]byte, error) {
	if r.OK {
		return json.Marshal(map[string]any{"id": r.ID, "ok": true, "data": r.Data})
	}
	return json.Marshal(map[string]any{"id": r.ID, "ok": false, "error": r.Error})
}

func handle(lib Library, ops map[string]Op, line []byte) reply {
	var req map[string]any
	if err := decodeJSON(line, &req); err != nil || req == nil {
		info := DriverError("DRIVER_ERROR", fmt.Sprintf("malformed request: %v", err))
		return reply{ID: nil, Error: &info}
	}
	id := req["id"]
	op, _ := req["op"].(string)
	budget := 30000.0
	if v, ok := number(req["deadline_ms"]); ok {
		budget = v
	}
	deadline := NewDeadline(budget)
	if _, known := OpNames[op]; !known && len(OpNames) > 0 {
		info := DriverError("DRIVER_ERROR", fmt.Sprintf("unknown op %q", op))
		return reply{ID: id, Error: &info}
	}
	fn, ok := ops[op]
	if !ok {
		why, listed := lib.Unsupported()[op]
		if !listed {
			why = "the library has no such operation"
		}
		info := DriverError("UNSUPPORTED_BY_CLIENT", op+": "+why)
		return reply{ID: id, Error: &info}
	}
	args := Args{}
	for k, v := range req {
		if k != "id" && k != "op" && k != "deadline_ms" {
			args[k] = v
		}
	}
	type result struct {
		data map[string]any
		info *ErrorInfo
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				info := DriverError("DRIVER_ERROR", fmt.Sprintf("%s panicked: %v\n%s", op, r, debug.Stack()))
				done <- result{info: &info}
			}
		}()
		data, err := fn(args, deadline)
		if err != nil {
			info := normalise(lib, err, op)
			done <- result{info: &info}
			return
		}
		if data == nil {
			data = map[string]any{}
		}
		done <- result{data: data}
	}()
	timer := time.NewTimer(deadline.Remaining() + LibrarySlack)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.info != nil {
			return reply{ID: id, Error: r.info}
		}
		return reply{ID: id, OK: true, Data: r.data}
	case <-timer.C:
		info := DriverError("DEADLINE_EXCEEDED",
			fmt.Sprintf("%s: the library call was still running after %.0f ms", op, budget))
		return reply{ID: id, Error: &info}
	}
}

// normalise: errors the driver decided carry their outcome; the library's go to the Library.
func normalise(lib Library, err error, op string) ErrorInfo {
	if oe, ok := err.(*OpError); ok {
		return oe.Info
	}
	return lib.Normalise(err, op)
}

// Deadline is an op's time budget; every blocking library call gets Remaining() at most.
type Deadline struct {
	End    time.Time
	Budget time.Duration
}

// NewDeadline starts a budget of budgetMs milliseconds now.
func NewDeadline(budgetMs float64) Deadline {
	b := time.Duration(budgetMs * float64(time.Millisecond))
	return Deadline{End: time.Now().Add(b), Budget: b}
}

// Remaining is the time left, never negative.
func (d Deadline) Remaining() time.Duration {
	if r := time.Until(d.End); r > 0 {
		return r
	}
	return 0
}

// RemainingMs is Remaining in whole milliseconds.
func (d Deadline) RemainingMs() int64 { return d.Remaining().Milliseconds() }

// Expired says whether the budget is spent.
func (d Deadline) Expired() bool { return !time.Now().Before(d.End) }

// Within returns a deadline that ends at d's end or after at most limit, whichever is first.
func (d Deadline) Within(limit time.Duration) Deadline {
	if r := d.Remaining(); r < limit {
		limit = r
	}
	return Deadline{End: time.Now().Add(limit), Budget: limit}
}

// OpNames is the definition's op list (ops.yaml), handed over by the runner as --ops=a,b,c so
// that the list stays defined once: an op outside it is a DRIVER_ERROR, an op in it that the
// library lacks is UNSUPPORTED_BY_CLIENT. Empty when the driver was started by hand.
var OpNames = map[string]struct{}{}

// SetOpNames fills OpNames from a comma-separated list.
func SetOpNames(list string) {
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			OpNames[name] = struct{}{}
		}
	}
}

// Main runs a driver over stdin/stdout and exits when stdin closes. Whatever a library prints
// to stdout would corrupt the reply stream, so fd 1 is kept for replies and os.Stdout points at
// stderr from here on.
func Main(lib Library) {
	replies := os.Stdout
	os.Stdout = os.Stderr
	w := bufio.NewWriter(replies)
	out := flushingWriter{w}
	if err := Serve(lib, os.Stdin, out); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
	os.Exit(0) // stdin closed: the runner is done with us; do not wait for client goroutines
}

type flushingWriter struct{ w *bufio.Writer }

func (f flushingWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.w.Flush()
}
