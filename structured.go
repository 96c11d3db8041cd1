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
	"reflect"
	"slices"
	"strings"
	"sync"

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
// WithJSONSchema the JSON Schema is derived from T (its exported fields by
// their json names; fields without omitempty or omitzero are required;
// pointers and slices may be null; a number or boolean with the ",string"
// option and a type that reads itself from text only are strings),
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

// The interfaces encoding/json reads a value through.
var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// fitSchema corrects s, the schema jsonschema.For derived for t from its
// Go structure, where encoding/json reads t from another shape, and
// returns it: a type that reads itself from text only (an
// encoding.TextUnmarshaler that is no json.Unmarshaler, such as
// netip.Addr or a UUID) is a JSON string, and so is a number or boolean
// field with the json ",string" option. Left as derived, the schema would
// refuse every answer that decodes and pass only those that do not.
func fitSchema(t reflect.Type, s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	if implements(t, textUnmarshalerType) && !implements(t, jsonUnmarshalerType) {
		return stringSchema(nullable)
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

// fitFields applies fitSchema to the properties of s, the schema of the
// struct type t, naming fields as jsonschema.For does (the last visible
// field of a name gave its property).
func fitFields(t reflect.Type, s *jsonschema.Schema) {
	fields := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		if f.Anonymous || !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		fields[cmp.Or(name, f.Name)] = f
	}
	for name, f := range fields {
		p := s.Properties[name]
		if p == nil {
			continue
		}
		_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if ok, ptr := quoted(f.Type); ok && slices.Contains(strings.Split(opts, ","), "string") {
			s.Properties[name] = stringSchema(ptr)
			continue
		}
		s.Properties[name] = fitSchema(f.Type, p)
	}
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
