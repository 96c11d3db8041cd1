//go:build goexperiment.jsonv2

package transport

// The jsontext arms of BenchmarkDecoders, built only with
// GOEXPERIMENT=jsonv2 (the standard library's encoding/json/jsontext; the
// module github.com/go-json-experiment/json would raise the go directive
// to 1.26):
//
//	GOEXPERIMENT=jsonv2 go test -run '^$' -bench 'Decoders' ./transport/

import (
	"bytes"
	"encoding/json/jsontext"
	"errors"
	"io"
	"testing"
)

// jtChunk reads what the transport needs of a chunk or an answer with a
// jsontext.Decoder: model, the first choice's content, reasoning_content
// and finish_reason, the usage counts. Keys are compared raw; strings are
// unquoted into the caller's buffers; nothing else is kept.
type jtChunk struct {
	dec                              *jsontext.Decoder
	model, content, thinking, finish []byte
	prompt, completion               int64
}

// key reads a member name, raw (with its quotes).
func (c *jtChunk) key() (string, error) {
	v, err := c.dec.ReadValue()
	return string(v), err // compared at once: the conversion does not allocate
}

func (c *jtChunk) str(dst []byte) ([]byte, error) {
	v, err := c.dec.ReadValue()
	if err != nil || v.Kind() != '"' {
		return dst, err
	}
	return jsontext.AppendUnquote(dst, v)
}

func (c *jtChunk) decode() error {
	c.model, c.finish = c.model[:0], c.finish[:0]
	dec := c.dec
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		switch string(v) {
		case `"model"`:
			c.model, err = c.str(c.model)
		case `"choices"`:
			err = c.choices()
		case `"usage"`:
			err = c.usage()
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return errors.New("data after the object")
	}
	return nil
}

func (c *jtChunk) choices() error {
	dec := c.dec
	if dec.PeekKind() != '[' {
		return dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for first := true; dec.PeekKind() != ']'; first = false {
		if !first || dec.PeekKind() != '{' {
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		for dec.PeekKind() != '}' {
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			switch string(v) {
			case `"delta"`, `"message"`:
				err = c.delta()
			case `"finish_reason"`:
				c.finish, err = c.str(c.finish)
			default:
				err = dec.SkipValue()
			}
			if err != nil {
				return err
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

func (c *jtChunk) delta() error {
	dec := c.dec
	if dec.PeekKind() != '{' {
		return dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		switch string(v) {
		case `"content"`:
			c.content, err = c.str(c.content)
		case `"reasoning_content"`:
			c.thinking, err = c.str(c.thinking)
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

func (c *jtChunk) usage() error {
	dec := c.dec
	if dec.PeekKind() != '{' {
		return dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		switch string(v) {
		case `"prompt_tokens"`, `"completion_tokens"`:
			prompt := string(v) == `"prompt_tokens"`
			t, err := dec.ReadToken()
			if err != nil {
				return err
			}
			if prompt {
				c.prompt = t.Int()
			} else {
				c.completion = t.Int()
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	_, err := dec.ReadToken()
	return err
}

func BenchmarkDecodersJSONText(b *testing.B) {
	for _, tc := range decoderInputs {
		b.Run(tc.name+"/jsontext", func(b *testing.B) {
			r := bytes.NewReader(tc.in)
			c := jtChunk{dec: jsontext.NewDecoder(r)}
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(tc.in)
				c.dec.Reset(r)
				if err := c.decode(); err != nil {
					b.Fatal(err)
				}
				if len(c.content) > 1<<16 {
					c.content, c.thinking = c.content[:0], c.thinking[:0]
				}
			}
		})
	}
	b.Run("error_envelope/jsontext", func(b *testing.B) {
		r := bytes.NewReader(benchErrBody)
		dec := jsontext.NewDecoder(r)
		var code, typ, msg []byte
		b.ReportAllocs()
		for b.Loop() {
			r.Reset(benchErrBody)
			dec.Reset(r)
			code, typ, msg = code[:0], typ[:0], msg[:0]
			if _, err := dec.ReadToken(); err != nil {
				b.Fatal(err)
			}
			for dec.PeekKind() != '}' {
				k, _ := dec.ReadValue()
				if string(k) != `"error"` || dec.PeekKind() != '{' {
					_ = dec.SkipValue()
					continue
				}
				_, _ = dec.ReadToken()
				for dec.PeekKind() != '}' {
					k, _ := dec.ReadValue()
					name := string(k)
					v, err := dec.ReadValue()
					if err != nil {
						b.Fatal(err)
					}
					switch name {
					case `"code"`:
						code, _ = jsontext.AppendUnquote(code, v)
					case `"type"`:
						typ, _ = jsontext.AppendUnquote(typ, v)
					case `"message"`:
						msg, _ = jsontext.AppendUnquote(msg, v)
					}
				}
				_, _ = dec.ReadToken()
			}
			_, _ = dec.ReadToken()
			if len(code) == 0 {
				b.Fatal("no code")
			}
		}
	})
}
