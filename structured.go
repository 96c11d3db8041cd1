package polygateway

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/kaptinlin/jsonrepair"
	validator "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
)

// WithJSON requires the answer to be a JSON object or array. The text is
// repaired first (markdown fences, trailing commas, single quotes, truncated brackets);
// the parsed value is in LLMResponse.StructuredData. An answer cut at its
// token limit (finish_reason "length") is never repaired: unless it is
// valid JSON as sent it is invalid, and re-asked like any invalid answer.
func WithJSON() CallOption { return func(o *kernel.CallOptions) { o.JSON = true } }

// WithJSONSchema requires the answer to be JSON valid against schema (a
// JSON Schema document). The schema is compiled once per client and cached.
// Where the provider supports it natively it is also sent upstream as
// response_format; repair and validation run either way.
func WithJSONSchema(schema []byte) CallOption {
	return func(o *kernel.CallOptions) { o.JSON, o.JSONSchema = true, bytes.Clone(schema) }
}

// reaskPrompt feeds the validation error back to the model.
const reaskPrompt = "Your previous reply could not be used: %s\n" +
	"Reply again with only the corrected JSON: no explanation, no markdown fences."

// ChatInto makes a structured call and decodes the answer into T. Without
// WithJSONSchema the JSON Schema is derived from T (the fields
// encoding/json reads, by their json names, embedded ones as it reads
// them; fields without omitempty or omitzero are required; pointers and
// slices may be null; a number or boolean with the ",string" option and a
// type that reads itself from text only are strings; a type that reads
// itself from JSON, such as json.RawMessage, may be any value),
// validated against, and sent natively
// where the provider supports it. Invalid answers are re-asked with the
// error fed back, at most PGW_STRUCTURED_MAX_RETRIES times; each re-ask is
// a governed, billed call with its own telemetry row linked by
// parent_call_id. The final failure is a *ResultInvalidError carrying the
// last raw text, returned with the last response.
func ChatInto[T any](ctx context.Context, c *GatewayClient, msgs []Message, opts ...CallOption) (T, *LLMResponse, error) {
	var zero T
	co := kernel.ResolveCall(opts)
	co.JSON = true
	if co.JSONSchema == nil {
		co.JSONSchema = schemaOf[T]()
	}
	decode := func(raw []byte) (any, error) {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
	resp, err := c.chatStructured(ctx, msgs, co, decode, reflect.TypeFor[T]().String())
	if err != nil {
		return zero, resp, err
	}
	v, _ := resp.StructuredData.(T)
	return v, resp, nil
}

// schemaCache compiles each distinct schema once per client.
type schemaCache struct {
	mu      sync.Mutex
	schemas map[string]*validator.Schema
}

func (sc *schemaCache) compile(digest string, schema []byte) (*validator.Schema, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if s, ok := sc.schemas[digest]; ok {
		return s, nil
	}
	doc, err := validator.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	comp := validator.NewCompiler()
	loc := schemaLoc(digest)
	if err := comp.AddResource(loc, doc); err != nil {
		return nil, err
	}
	s, err := comp.Compile(loc)
	if err != nil {
		return nil, err
	}
	if sc.schemas == nil {
		sc.schemas = map[string]*validator.Schema{}
	}
	sc.schemas[digest] = s
	return s, nil
}

// schemaLoc is the location a schema is compiled under.
func schemaLoc(digest string) string { return "mem://polygateway/" + digest + ".json" }

// digestOf returns the hex SHA-256 of a schema.
func digestOf(schema []byte) string {
	sum := sha256.Sum256(schema)
	return hex.EncodeToString(sum[:])
}

// cutAtLimit reports an answer the model was stopped in (finish_reason
// "length") whose text is not valid JSON as sent: repair would close its
// brackets and present the part as the whole, so it is never repaired.
// JSON that is whole as sent is taken at its word.
func cutAtLimit(resp *core.LLMResponse) bool {
	return resp.FinishReason == "length" && !json.Valid([]byte(strings.TrimSpace(resp.Content)))
}

// repairJSON turns a model's answer into JSON text, or explains why it cannot.
func repairJSON(text string) (string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return "", errors.New("the answer is empty, expected JSON")
	}
	if json.Valid([]byte(text)) {
		return text, nil
	}
	fixed, err := jsonrepair.Repair(text)
	if err != nil {
		return "", errors.New("the answer is not JSON: " + err.Error())
	}
	fixed = strings.TrimSpace(fixed)
	if fixed == "" || !json.Valid([]byte(fixed)) {
		return "", errors.New("the answer is not JSON")
	}
	return fixed, nil
}

// chatStructured runs the repair → validate → re-ask loop.
func (c *GatewayClient) chatStructured(ctx context.Context, msgs []Message, co kernel.CallOptions, decode func([]byte) (any, error), typeTag string) (*LLMResponse, error) {
	if len(msgs) == 0 {
		return nil, &RequestRejectedError{Code: "empty_messages", Message: "no messages to send"}
	}
	tag := "json"
	var (
		schema *validator.Schema
		loc    string
	)
	if co.JSONSchema != nil {
		digest := digestOf(co.JSONSchema)
		var err error
		if schema, err = c.schemas.compile(digest, co.JSONSchema); err != nil {
			return nil, &RequestRejectedError{Code: "invalid_json_schema", Message: "the JSON schema does not compile: " + err.Error(), Err: err}
		}
		tag, loc = "schema:"+digest, schemaLoc(digest)
	}
	if typeTag != "" {
		tag += ";type:" + typeTag
	}
	check := func(resp *core.LLMResponse) error {
		if cutAtLimit(resp) {
			return errors.New(`the answer was cut at its token limit (finish_reason "length") before its JSON ended; reply with shorter JSON`)
		}
		text, err := repairJSON(resp.Content)
		if err != nil {
			return err
		}
		if schema != nil {
			inst, err := validator.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				return errors.New("the answer is not JSON: " + err.Error())
			}
			if err := schema.Validate(inst); err != nil {
				// The schema's internal location means nothing to the model.
				msg := strings.ReplaceAll(err.Error(), loc, "schema")
				return errors.New("the JSON does not match the schema: " + msg)
			}
		}
		if decode != nil {
			v, err := decode([]byte(text))
			if err != nil {
				return errors.New("the JSON does not fit the expected shape: " + err.Error())
			}
			resp.StructuredData = v
			return nil
		}
		if err := oneDocument(resp.Content, text); err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			return errors.New("the answer is not JSON: " + err.Error())
		}
		resp.StructuredData = v
		return nil
	}
	conversation := append([]Message(nil), msgs...)
	firstID := ""
	for attempt := 0; ; attempt++ {
		call := c.newCall(conversation, co)
		call.Check, call.Structured = check, tag
		call.Fallback = c.checkedFallback(call.Fallback, check)
		if attempt > 0 {
			call.ParentCallID = firstID
		} else {
			firstID = call.ID
		}
		resp, err := c.k.Handle(ctx, call)
		if err == nil {
			return resp, nil
		}
		var invalid *core.ResultInvalidError
		if !errors.As(err, &invalid) || resp == nil || attempt >= c.k.Settings().StructuredMaxRetries {
			return resp, err
		}
		conversation = append(conversation, Assistant(resp.Content), User(fmt.Sprintf(reaskPrompt, invalid.Message)))
	}
}

// checkedFallback returns the fallback of a structured call, fb or else
// the scope's: its answer stands in only when it passes check, like any
// answer (check fills its StructuredData); one that does not is no
// answer, and the call fails with the error that made it fall back. The
// answer is checked on a copy, so that a fallback may return one canned
// answer to every call.
func (c *GatewayClient) checkedFallback(fb FallbackFunc, check func(*core.LLMResponse) error) FallbackFunc {
	if fb == nil {
		fb = c.fallback
	}
	if fb == nil {
		return nil
	}
	return func(ctx context.Context, msgs []Message, cause error) (*LLMResponse, error) {
		a, err := fb(ctx, msgs, cause)
		if err != nil || a == nil {
			return a, err
		}
		own := *a
		if err := check(&own); err != nil {
			return nil, err
		}
		return &own, nil
	}
}

// oneDocument refuses what plain WithJSON cannot take from answer, whose
// repaired JSON is text: a document is opened by the answer's first
// bracket. Prose that repair turned into a bare JSON string, or into an
// array of its comma-separated phrases, is not one, nor is the array
// repair wraps around an object and what follows it (a note after the
// fenced block, a second object).
func oneDocument(answer, text string) error {
	if i := strings.IndexAny(answer, "{["); i < 0 || answer[i] != text[0] {
		return errors.New("the answer is not one JSON object or array")
	}
	return nil
}

// derivedSchemas caches the schema derived from each type (nil when none
// could be: interfaces, channels, functions).
var derivedSchemas sync.Map // reflect.Type → []byte

// schemaOf returns the JSON Schema derived from T, or nil.
func schemaOf[T any]() []byte {
	t := reflect.TypeFor[T]()
	if v, ok := derivedSchemas.Load(t); ok {
		return v.([]byte)
	}
	var out []byte
	if s, err := jsonschema.For[T](nil); err == nil {
		if b, err := json.Marshal(fitSchema(t, s)); err == nil {
			out = b
		}
	}
	derivedSchemas.Store(t, out)
	return out
}

// The interfaces encoding/json reads a value through, and the types it
// reads in a way of their own.
var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	timeType            = reflect.TypeFor[time.Time]()
	numberType          = reflect.TypeFor[json.Number]()
)

// fitSchema corrects s, the schema jsonschema.For derived for t from its
// Go structure, where encoding/json reads t from another shape, and
// returns it: a type that reads itself from JSON (a json.Unmarshaler,
// such as json.RawMessage or big.Int, other than time.Time, whose string
// form jsonschema.For knows) may be any JSON value; one that reads itself
// from text only (an encoding.TextUnmarshaler that is no json.Unmarshaler,
// such as netip.Addr or a UUID) is a JSON string, and so is a number or
// boolean field with the json ",string" option; a json.Number is a number
// or a string holding one; and a struct has the fields encoding/json
// reads (see jsonFields). Left as derived, the schema would refuse every
// answer that decodes and pass only those that do not.
func fitSchema(t reflect.Type, s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	switch {
	case t == timeType:
		return s
	case implements(t, jsonUnmarshalerType):
		return &jsonschema.Schema{}
	case implements(t, textUnmarshalerType):
		return stringSchema(nullable)
	case t == numberType:
		return typesSchema(nullable, "number", "string")
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		s.Items = fitSchema(t.Elem(), s.Items)
	case reflect.Map:
		s.AdditionalProperties = fitSchema(t.Elem(), s.AdditionalProperties)
	case reflect.Struct:
		fitFields(t, s)
	}
	return s
}

// fitFields makes the properties of s, the schema of the struct type t,
// the fields encoding/json reads (jsonFields), and applies fitSchema to
// them. jsonschema.For promotes the fields of every embedded struct and
// skips every other embedded field; an embedded field encoding/json reads
// as one field of its own gets its schema here, and is required unless
// tagged omitempty or omitzero.
func fitFields(t reflect.Type, s *jsonschema.Schema) {
	fields := jsonFields(t)
	read := make(map[string]bool, len(fields))
	for _, f := range fields {
		read[f.name] = true
	}
	maps.DeleteFunc(s.Properties, func(name string, _ *jsonschema.Schema) bool { return !read[name] })
	s.Required = slices.DeleteFunc(s.Required, func(name string) bool { return !read[name] })
	s.PropertyOrder = s.PropertyOrder[:0]
	for _, jf := range fields {
		name, f := jf.name, jf.field
		_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		s.PropertyOrder = append(s.PropertyOrder, name)
		p := s.Properties[name]
		if p == nil {
			if p, _ = jsonschema.ForType(f.Type, nil); p == nil {
				p = &jsonschema.Schema{}
			}
			if s.Properties == nil {
				s.Properties = map[string]*jsonschema.Schema{}
			}
			if options := strings.Split(opts, ","); !slices.Contains(options, "omitempty") && !slices.Contains(options, "omitzero") {
				s.Required = append(s.Required, name)
			}
		}
		if ok, ptr := quoted(f.Type); ok && slices.Contains(strings.Split(opts, ","), "string") {
			s.Properties[name] = stringSchema(ptr)
			continue
		}
		s.Properties[name] = fitSchema(f.Type, p)
	}
}

// jsonField is a struct field by the name encoding/json reads it under.
type jsonField struct {
	name  string
	field reflect.StructField
}

// jsonFields returns the fields of the struct type t that encoding/json
// reads, by their JSON names, in field order (of several with one name,
// the last visible, as jsonschema.For keeps): the exported fields not
// tagged "-", where an embedded struct without a name in its tag gives its
// fields, one named by its tag is one field, and any other embedded field
// is one field named by its type when exported and none when not.
func jsonFields(t reflect.Type) []jsonField {
	var (
		out   []jsonField
		at    = map[string]int{}
		inner [][]int // embedded fields whose fields are not promoted
	)
	for _, f := range reflect.VisibleFields(t) {
		if slices.ContainsFunc(inner, func(p []int) bool { return len(f.Index) > len(p) && slices.Equal(f.Index[:len(p)], p) }) {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch isStruct := ft.Kind() == reflect.Struct; {
		case tag == "-":
			inner = append(inner, f.Index)
			continue
		case f.Anonymous && isStruct && name == "":
			continue // its fields are promoted
		case f.Anonymous:
			inner = append(inner, f.Index)
			if !isStruct && !f.IsExported() {
				continue
			}
		case !f.IsExported():
			continue
		}
		name = cmp.Or(name, f.Name)
		if i, ok := at[name]; ok {
			out[i].field = f
			continue
		}
		at[name] = len(out)
		out = append(out, jsonField{name, f})
	}
	return out
}

// quoted reports whether encoding/json reads a field of type t with the
// ",string" option from a quoted JSON string (a number or boolean, or an
// unnamed pointer to one), and whether through a pointer (then null too).
func quoted(t reflect.Type) (ok, ptr bool) {
	ptr = t.Name() == "" && t.Kind() == reflect.Pointer
	if ptr {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true, ptr
	}
	return false, false
}

// implements reports whether t, or a pointer to it, implements iface, as
// encoding/json looks for it on the value it decodes into.
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// stringSchema is the schema of a JSON string, or null when nullable.
func stringSchema(nullable bool) *jsonschema.Schema {
	if nullable {
		return &jsonschema.Schema{Types: []string{"null", "string"}}
	}
	return &jsonschema.Schema{Type: "string"}
}

// typesSchema is the schema of a JSON value of one of types, or null when
// nullable.
func typesSchema(nullable bool, types ...string) *jsonschema.Schema {
	if nullable {
		types = append([]string{"null"}, types...)
	}
	return &jsonschema.Schema{Types: types}
}
