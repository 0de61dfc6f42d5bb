package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrorInfo is the protocol's normalised error (protocol.ErrorInfo): Kafka's name and code plus
// the client's own classification of the error.
type ErrorInfo struct {
	Name        string
	Code        *int
	Retriable   bool
	Abortable   bool
	Fatal       bool
	Fenced      bool
	Message     string
	ClientClass string
	Origin      string
	CauseClass  string
	Extra       map[string]any
}

// MarshalJSON writes the fixed fields, then Extra's.
func (e ErrorInfo) MarshalJSON() ([]byte, error) {
	out := map[string]any{}
	for k, v := range e.Extra {
		out[k] = v
	}
	out["name"] = e.Name
	if e.Code != nil {
		out["code"] = *e.Code
	} else {
		out["code"] = nil
	}
	out["retriable"] = e.Retriable
	out["abortable"] = e.Abortable
	out["fatal"] = e.Fatal
	out["fenced"] = e.Fenced
	out["message"] = e.Message
	out["client_class"] = e.ClientClass
	out["origin"] = e.Origin
	if e.CauseClass != "" {
		out["cause_class"] = e.CauseClass
	}
	return json.Marshal(out)
}

// With adds extra fields (e.g. deliveries, pending) and returns the info.
func (e ErrorInfo) With(key string, value any) ErrorInfo {
	extra := map[string]any{}
	for k, v := range e.Extra {
		extra[k] = v
	}
	extra[key] = value
	e.Extra = extra
	return e
}

// OpError is an outcome the driver decided (origin "driver"), or a library error the driver
// already normalised (a delivery report, a per-partition result): it becomes the reply as is.
type OpError struct{ Info ErrorInfo }

func (e *OpError) Error() string { return e.Info.Name + ": " + e.Info.Message }

// DriverError is an outcome with a non-Kafka name decided by the driver itself.
func DriverError(name, message string) ErrorInfo {
	return ErrorInfo{Name: name, Code: KafkaCode(name), Message: message, Origin: "driver"}
}

// Fail returns an *OpError with origin "driver" (ILLEGAL_STATE, INVALID_ARGUMENT, ...).
func Fail(name, format string, args ...any) error {
	return &OpError{DriverError(name, fmt.Sprintf(format, args...))}
}

// Reported wraps an already normalised error so an op returns it unchanged.
func Reported(info ErrorInfo) error { return &OpError{info} }

// Kafka's Errors enum by code. franz-go's kerr carries Kafka's table (read from kafka-clients);
// it still spells code 6 by its pre-2.6 name. tests/integration/clients/test_go_drivers.py
// checks this table against broker_impl.codec.ERROR_TABLE (kafka-clients 4.4.0), entry by entry.
var renamed = map[int16]string{6: "NOT_LEADER_OR_FOLLOWER"}

// KafkaName is Kafka's enum name for a wire error code, or "" when Kafka does not know the code.
func KafkaName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if name, ok := renamed[code]; ok {
		return name
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) && ke.Code == code {
		return ke.Message
	}
	return ""
}

// KafkaCode is the wire code of a Kafka error name, or nil for the non-Kafka names
// (errors.LOCAL_NAMES: ILLEGAL_STATE, DEADLINE_EXCEEDED, ...).
func KafkaCode(name string) *int {
	if code, ok := codesByName()[name]; ok {
		c := int(code)
		return &c
	}
	return nil
}

var byName map[string]int16

func codesByName() map[string]int16 {
	if byName == nil {
		m := map[string]int16{}
		for code := int16(-1); code < 1000; code++ {
			if name := KafkaName(code); name != "" {
				m[name] = code
			}
		}
		byName = m
	}
	return byName
}

// ErrorTable is the whole table, for the test that compares it with Kafka's.
func ErrorTable() map[int16]string {
	out := map[int16]string{}
	for name, code := range codesByName() {
		out[code] = name
	}
	return out
}

// FromCode starts an ErrorInfo for a Kafka error code a client reported; an unknown code keeps
// its number and is named CLIENT_ERROR.
func FromCode(code int16, message, clientClass string) ErrorInfo {
	name := KafkaName(code)
	info := ErrorInfo{Name: name, Message: message, ClientClass: clientClass, Origin: "client",
		Extra: map[string]any{"client_code": int(code)}}
	if name == "" {
		info.Name = "CLIENT_ERROR"
	} else {
		c := int(code)
		info.Code = &c
	}
	return info
}

// Local starts an ErrorInfo with a non-Kafka name that the client raised.
func Local(name, message, clientClass string) ErrorInfo {
	return ErrorInfo{Name: name, Code: KafkaCode(name), Message: message, ClientClass: clientClass,
		Origin: "client"}
}

// TypeName is an error's Go type, the client_class of errors without a name of their own.
func TypeName(err error) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
}

// RetriableCode is Kafka's own classification of a wire error (its RetriableException family),
// from the same table: for the driver's admin reads, never for a client's classification.
func RetriableCode(code int16) bool {
	var ke *kerr.Error
	return errors.As(kerr.ErrorForCode(code), &ke) && ke.Code == code && ke.Retriable
}
