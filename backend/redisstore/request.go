package redisstore

import (
	"math"
	"strconv"
)

// request writes the one argument every script takes: a JSON object with
// named fields, decoded by the script with cjson (see lua/lib/common.lua).
// The requests are small and of a fixed shape, so they are written by hand
// into one buffer rather than through encoding/json.
type request struct {
	b     []byte
	comma bool
}

func newRequest() *request { return &request{b: make([]byte, 0, 384)} }

// String returns the request's text.
func (r *request) String() string { return string(r.b) }

func (r *request) sep() {
	if r.comma {
		r.b = append(r.b, ',')
	}
}

func (r *request) key(k string) {
	r.sep()
	r.b = append(r.b, '"')
	r.b = append(r.b, k...)
	r.b = append(r.b, '"', ':')
	r.comma = false
}

// open starts the request, or an object in an array.
func (r *request) open() {
	r.sep()
	r.b = append(r.b, '{')
	r.comma = false
}

// object starts the object field k.
func (r *request) object(k string) {
	r.key(k)
	r.b = append(r.b, '{')
	r.comma = false
}

// close ends the innermost object.
func (r *request) close() {
	r.b = append(r.b, '}')
	r.comma = true
}

// array starts the array field k.
func (r *request) array(k string) {
	r.key(k)
	r.b = append(r.b, '[')
	r.comma = false
}

// end ends the innermost array.
func (r *request) end() {
	r.b = append(r.b, ']')
	r.comma = true
}

func (r *request) int(k string, v int64) {
	r.key(k)
	r.b = strconv.AppendInt(r.b, v, 10)
	r.comma = true
}

// elem writes v as the next element of the innermost array.
func (r *request) elem(v int64) {
	r.sep()
	r.b = strconv.AppendInt(r.b, v, 10)
	r.comma = true
}

func (r *request) uint(k string, v uint64) {
	r.key(k)
	r.b = strconv.AppendUint(r.b, v, 10)
	r.comma = true
}

// float writes v in its shortest exact form; NaN and infinities, which
// JSON cannot carry, are written as 0.
func (r *request) float(k string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	r.key(k)
	r.b = strconv.AppendFloat(r.b, v, 'g', -1, 64)
	r.comma = true
}

func (r *request) bool(k string, v bool) {
	r.key(k)
	r.b = strconv.AppendBool(r.b, v)
	r.comma = true
}

func (r *request) str(k, v string) {
	r.key(k)
	r.b = appendJSONString(r.b, v)
	r.comma = true
}

// now writes the "now" field of a test clock; without one the script reads
// the server's TIME.
func (r *request) now(o *options) {
	if o.clock != nil {
		r.int("now", o.clock.Now().UnixMicro())
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Bytes other than the quote,
// the backslash and control characters are copied as they are (cjson takes
// them so), which keeps a name's bytes intact whatever they are.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
