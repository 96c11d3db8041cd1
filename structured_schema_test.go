package polygateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/polygatewaytest"
)

// chatIntoOnce asks a fake that answers answer for a T, without re-asks.
func chatIntoOnce[T any](t *testing.T, answer string) (T, error) {
	t.Helper()
	fake := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(polygatewaytest.OK().WithContent(answer)))
	env := fake.Env("LLM")
	env["PGW_STRUCTURED_MAX_RETRIES"] = "0"
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	v, _, err := polygateway.ChatInto[T](context.Background(), client, []polygateway.Message{polygateway.User("the record")})
	return v, err
}

// decodesAsEncodingJSON checks that ChatInto takes answer, which
// encoding/json decodes into T, at once and returns what it decodes to.
func decodesAsEncodingJSON[T any](answer string) func(*testing.T) {
	return func(t *testing.T) {
		t.Parallel()
		var want T
		if err := json.Unmarshal([]byte(answer), &want); err != nil {
			t.Fatalf("the test's answer does not decode: %v", err)
		}
		got, err := chatIntoOnce[T](t, answer)
		if err != nil {
			t.Fatalf("ChatInto refused %s, which decodes into %T: %v", answer, want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ChatInto = %+v, want %+v", got, want)
		}
	}
}

type schemaBase struct {
	ID int `json:"id"`
}

type schemaTags []string

// level reads itself from JSON as a word.
type level int

func (l *level) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	switch s {
	case "low":
		*l = 1
	case "high":
		*l = 2
	default:
		return fmt.Errorf("unknown level %q", s)
	}
	return nil
}

type (
	withTaggedEmbed struct {
		schemaBase `json:"base"`
		Name       string `json:"name"`
	}
	withIgnoredEmbed struct {
		schemaBase `json:"-"`
		Name       string `json:"name"`
	}
	withEmbeddedSlice struct {
		schemaTags            //nolint:unused // the embedded field encoding/json does not read is the case
		SchemaTags schemaTags `json:"tags"`
		Name       string     `json:"name"`
	}
	withExportedEmbeddedSlice struct {
		Tags
		Name string `json:"name"`
	}
	withRawMessage struct {
		Raw json.RawMessage `json:"raw"`
	}
	withUnmarshaler struct {
		Level level  `json:"level"`
		Ptr   *level `json:"ptr"`
	}
	withNumber struct {
		N json.Number  `json:"n"`
		P *json.Number `json:"p"`
	}
	withBigInt struct {
		N *big.Int `json:"n"`
	}
)

// Tags is an exported slice type, embedded: encoding/json reads it as the
// field "Tags".
type Tags []string

// The schema ChatInto derives from T describes the JSON encoding/json
// decodes into T, for every way a struct may differ from its JSON:
// embedded fields that are not promoted (named by a tag, ignored by "-",
// or not structs), and types that read themselves from JSON. An answer
// that decodes is taken at once.
func TestChatIntoTakesEveryAnswerThatDecodesIntoItsType(t *testing.T) {
	t.Parallel()
	t.Run("embedded struct named by a tag", decodesAsEncodingJSON[withTaggedEmbed](`{"base": {"id": 7}, "name": "x"}`))
	t.Run("embedded struct ignored by a tag", decodesAsEncodingJSON[withIgnoredEmbed](`{"name": "x"}`))
	t.Run("embedded slice", decodesAsEncodingJSON[withExportedEmbeddedSlice](`{"Tags": ["a", "b"], "name": "x"}`))
	t.Run("unexported embedded slice", decodesAsEncodingJSON[withEmbeddedSlice](`{"tags": ["a"], "name": "x"}`))
	t.Run("json.RawMessage", decodesAsEncodingJSON[withRawMessage](`{"raw": {"k": [1, 2]}}`))
	t.Run("json.Unmarshaler", decodesAsEncodingJSON[withUnmarshaler](`{"level": "high", "ptr": "low"}`))
	t.Run("json.Number", decodesAsEncodingJSON[withNumber](`{"n": 1.5, "p": null}`))
	t.Run("big.Int", decodesAsEncodingJSON[withBigInt](`{"n": 123456789012345678901234567890}`))
}

// The fields of an embedded struct named by a tag are not promoted:
// an answer that puts them at the top level decodes into nothing and is
// not a success.
func TestChatIntoRefusesTheFieldsOfATaggedEmbeddedStructAtTheTopLevel(t *testing.T) {
	t.Parallel()
	v, err := chatIntoOnce[withTaggedEmbed](t, `{"id": 7, "name": "x"}`)
	var invalid *polygateway.ResultInvalidError
	if !errors.As(err, &invalid) {
		t.Fatalf("ChatInto = (%+v, %v), want a ResultInvalidError: the id would be lost", v, err)
	}
}
