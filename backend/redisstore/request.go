package redisstore

import (
	"bytes"
	"encoding/json"
	"math"
)

// request builds the one argument every script takes: a JSON object with
// named fields, decoded by the script with cjson (see lua/lib/common.lua).
// The writers add fields in the order of the script's header; the request
// keeps them as a tree of objects and arrays and String encodes it with
// encoding/json.
type request struct {
	root  map[string]any
	stack []frame
}

// frame is an object or an array being written, and where it goes when
// it ends: the field key of the object below it, or the next element of
// the array below it.
type frame struct {
	obj   map[string]any
	arr   []any
	isArr bool
	key   string
}

func newRequest() *request { return &request{stack: make([]frame, 0, 4)} }

// String returns the request's text. The tree holds only numbers,
// booleans, strings, objects and arrays, which encoding/json always
// encodes; strings that are not valid UTF-8 have their invalid bytes
// replaced, as encoding/json does.
func (r *request) String() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.root); err != nil {
		return "" // the script refuses an empty request
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))
}

func (r *request) top() *frame { return &r.stack[len(r.stack)-1] }

// set puts v under k in the innermost object, or appends it to the
// innermost array (k unused).
func (r *request) set(k string, v any) {
	if len(r.stack) == 0 {
		return
	}
	f := r.top()
	if f.isArr {
		f.arr = append(f.arr, v)
		return
	}
	f.obj[k] = v
}

// open starts the request, or an object in an array.
func (r *request) open() { r.stack = append(r.stack, frame{obj: map[string]any{}}) }

// object starts the object field k.
func (r *request) object(k string) {
	r.stack = append(r.stack, frame{obj: map[string]any{}, key: k})
}

// close ends the innermost object.
func (r *request) close() {
	f := r.stack[len(r.stack)-1]
	r.stack = r.stack[:len(r.stack)-1]
	if len(r.stack) == 0 {
		r.root = f.obj
		return
	}
	r.set(f.key, f.obj)
}

// array starts the array field k.
func (r *request) array(k string) {
	r.stack = append(r.stack, frame{arr: []any{}, isArr: true, key: k})
}

// end ends the innermost array.
func (r *request) end() {
	f := r.stack[len(r.stack)-1]
	r.stack = r.stack[:len(r.stack)-1]
	r.set(f.key, f.arr)
}

func (r *request) int(k string, v int64) { r.set(k, v) }

// elem writes v as the next element of the innermost array.
func (r *request) elem(v int64) { r.set("", v) }

func (r *request) uint(k string, v uint64) { r.set(k, v) }

// float writes v; NaN and infinities, which JSON cannot carry, are
// written as 0.
func (r *request) float(k string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	r.set(k, v)
}

func (r *request) bool(k string, v bool) { r.set(k, v) }

func (r *request) str(k, v string) { r.set(k, v) }

// now writes the "now" field of a test clock; without one the script reads
// the server's TIME.
func (r *request) now(o *options) {
	if o.clock != nil {
		r.int("now", o.clock.Now().UnixMicro())
	}
}
