//go:build goexperiment.jsonv2

package embed

// The jsontext arm of BenchmarkDecode, built only with GOEXPERIMENT=jsonv2
// (the standard library's encoding/json/jsontext; the module
// github.com/go-json-experiment/json would raise the go directive to 1.26):
//
//	GOEXPERIMENT=jsonv2 go test -run '^$' -bench 'DecodeJSONText' ./embed/

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json/jsontext"
	"math"
	"strconv"
	"testing"
)

// decodeJSONText decodes an answer of vectors of at most maxDim values
// into backing with a jsontext.Decoder: tokens streamed from its reader,
// numbers parsed by strconv from the raw value.
func decodeJSONText(dec *jsontext.Decoder, maxDim int, backing []float32, slots [][]float32, raw []byte) error {
	if _, err := dec.ReadToken(); err != nil { // {
		return err
	}
	dim := 0
	for dec.PeekKind() != '}' {
		k, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if k.String() != "data" {
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if _, err := dec.ReadToken(); err != nil { // [
			return err
		}
		for pos := 0; dec.PeekKind() != ']'; pos++ {
			if _, err := dec.ReadToken(); err != nil { // {
				return err
			}
			index := pos
			var vec []float32
			for dec.PeekKind() != '}' {
				k, err := dec.ReadToken()
				if err != nil {
					return err
				}
				switch k.String() {
				case "index":
					t, err := dec.ReadToken()
					if err != nil {
						return err
					}
					index = int(t.Int())
				case "embedding":
					if dec.PeekKind() == '"' {
						// The raw value, so that an unescaped string is not copied.
						v, err := dec.ReadValue()
						if err != nil {
							return err
						}
						str := []byte(v[1 : len(v)-1])
						if bytes.IndexByte(str, '\\') >= 0 {
							str = []byte(jsontext.Value(v).String())
						}
						b, err := base64.StdEncoding.AppendDecode(raw[:0], str)
						if err != nil {
							return err
						}
						raw = b
						if dim == 0 {
							dim = len(b) / 4
						}
						vec = backing[pos*maxDim : pos*maxDim+dim]
						for i := range vec {
							vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
						}
						continue
					}
					if _, err := dec.ReadToken(); err != nil { // [
						return err
					}
					k := 0
					for dec.PeekKind() != ']' {
						v, err := dec.ReadValue()
						if err != nil {
							return err
						}
						f, err := strconv.ParseFloat(string(v), 32)
						if err != nil {
							return err
						}
						if k < maxDim {
							backing[pos*maxDim+k] = float32(f)
						}
						k++
					}
					if _, err := dec.ReadToken(); err != nil { // ]
						return err
					}
					dim = min(k, maxDim)
					vec = backing[pos*maxDim : pos*maxDim+dim]
				default:
					if err := dec.SkipValue(); err != nil {
						return err
					}
				}
			}
			if _, err := dec.ReadToken(); err != nil { // }
				return err
			}
			slots[index] = vec
		}
		if _, err := dec.ReadToken(); err != nil { // ]
			return err
		}
	}
	_, err := dec.ReadToken() // }
	return err
}

// BenchmarkDecodeJSONText is BenchmarkDecode's input decoded by jsontext.
func BenchmarkDecodeJSONText(b *testing.B) {
	const n, dim = 64, 256
	for _, form := range []string{"float", "base64"} {
		body := benchBody(n, dim, form == "base64")
		b.Run(form, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			r := bytes.NewReader(body)
			dec := jsontext.NewDecoder(r)
			backing := make([]float32, n*dim)
			slots := make([][]float32, n)
			raw := make([]byte, 4*dim)
			for b.Loop() {
				r.Reset(body)
				dec.Reset(r)
				if err := decodeJSONText(dec, dim, backing, slots, raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/vector")
		})
	}
}
