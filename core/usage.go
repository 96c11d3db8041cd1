package core

import (
	"encoding/json"
	"math"
	"strconv"
)

// OutputLimit returns the most tokens a chat request's params allow its
// answer: max_completion_tokens, else max_tokens, as a Go number, a
// json.Number, or JSON text (json.RawMessage, as a server passes a
// client's fields through). ok is false when neither is set to a number;
// a negative limit reads as 0.
func OutputLimit(params map[string]any) (n int, ok bool) {
	for _, k := range [...]string{"max_completion_tokens", "max_tokens"} {
		if n, ok := intParam(params[k]); ok {
			return max(n, 0), true
		}
	}
	return 0, false
}

// intParam reads a whole number from a param value.
func intParam(v any) (int, bool) {
	var f float64
	switch v := v.(type) {
	case int:
		return v, true
	case int64:
		f = float64(v)
	case int32:
		return int(v), true
	case float64:
		f = v
	case json.Number:
		x, err := v.Float64()
		if err != nil {
			return 0, false
		}
		f = x
	case json.RawMessage:
		x, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, false
		}
		f = x
	default:
		return 0, false
	}
	if math.IsNaN(f) {
		return 0, false
	}
	return int(max(min(f, math.MaxInt32), math.MinInt32)), true
}
