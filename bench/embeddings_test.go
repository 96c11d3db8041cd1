package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
)

// embeddingsAnswer renders an OpenAI embeddings answer of n vectors of dim
// values, as float arrays (json.Marshal's float32 text: all the digits a
// float32 needs) or base64, and the same vectors' numbers alone as one
// JSON array of arrays.
func embeddingsAnswer(n, dim int, b64 bool) (answer, vectors []byte) {
	var ab, vb bytes.Buffer
	ab.WriteString(`{"object":"list","data":[`)
	vb.WriteByte('[')
	v := make([]float32, dim)
	for i := range n {
		for k := range v {
			// Like a real embedding: values of about ±1/√dim.
			v[k] = float32(math.Sin(float64(i*7919+k*104729)) * 0.08)
		}
		num, _ := json.Marshal(v)
		if i > 0 {
			ab.WriteByte(',')
			vb.WriteByte(',')
		}
		vb.Write(num)
		emb := num
		if b64 {
			raw := make([]byte, 0, 4*dim)
			for _, f := range v {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
			}
			emb, _ = json.Marshal(base64.StdEncoding.EncodeToString(raw))
		}
		fmt.Fprintf(&ab, `{"object":"embedding","index":%d,"embedding":%s}`, i, emb)
	}
	ab.WriteString(`],"model":"text-embedding-3-small","usage":{"prompt_tokens":1000,"total_tokens":1000}}`)
	vb.WriteByte(']')
	return ab.Bytes(), vb.Bytes()
}

// median returns the median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// rawAnswer is what a plain client unmarshals an embeddings answer into.
type rawAnswer struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

type rawBase64Answer struct {
	Data []struct {
		Index     int    `json:"index"`
		Embedding string `json:"embedding"`
	} `json:"data"`
}

// BenchmarkEmbeddingsDecode: an embeddings answer of 1,000 vectors of
// 1,536 values, answered by an in-memory RoundTripper and read by
// embed.Client.Embed (one batch: the request, governance, the decoder and
// the checks), against json.Unmarshal of the same bytes in the same run:
//
//   - unmarshal-µs/op: json.Unmarshal of the whole answer into its
//     struct (data[].embedding as []float32, or a base64 string decoded
//     after);
//   - vectors-µs/op (float): json.Unmarshal into [][]float32 of the
//     vectors' numbers alone, the same number text without the envelope;
//   - embed-µs/op, and the ratios embed/unmarshal and embed/vectors.
//
// The arms alternate op by op, each op after a garbage collection;
// embed/unmarshal-median and embed/vectors-median are the medians of the
// ops' own ratios.
func BenchmarkEmbeddingsDecode(b *testing.B) {
	const n, dim = 1000, 1536
	for _, format := range []string{embed.EncodingFloat, embed.EncodingBase64} {
		b.Run(format, func(b *testing.B) {
			answer, vectors := embeddingsAnswer(n, dim, format == embed.EncodingBase64)
			c, err := embed.FromEnv("EMBED", polygateway.WithEnv(map[string]string{
				"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
				"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
				"EMBED__OPENAI__1__BASE_URL": "http://upstream.invalid/v1", "EMBED__OPENAI__1__API_KEY": "sk-bench",
				"EMBED__OPENAI__1__MODEL": "text-embedding-3-small", "EMBED__OPENAI__1__TIMEOUT_S": "60",
				"EMBED__BATCH_SIZE": strconv.Itoa(n), "EMBED__ENCODING_FORMAT": format,
			}), polygateway.WithHTTPClient(&http.Client{Transport: inMemory{answer}}))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			texts := make([]string, n)
			for i := range texts {
				texts[i] = "text " + strconv.Itoa(i)
			}
			gov := func(int) error {
				resp, err := c.Embed(context.Background(), texts)
				if err == nil && (len(resp.Vectors) != n || resp.Dim != dim) {
					err = fmt.Errorf("%d vectors of %d", len(resp.Vectors), resp.Dim)
				}
				return err
			}
			whole := func(int) error {
				if format == embed.EncodingBase64 {
					var a rawBase64Answer
					if err := json.Unmarshal(answer, &a); err != nil {
						return err
					}
					for _, d := range a.Data {
						raw, err := base64.StdEncoding.DecodeString(d.Embedding)
						if err != nil {
							return err
						}
						v := make([]float32, len(raw)/4)
						for k := range v {
							v[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:]))
						}
					}
					return nil
				}
				var a rawAnswer
				return json.Unmarshal(answer, &a)
			}
			alone := func(int) error {
				var vv [][]float32
				return json.Unmarshal(vectors, &vv)
			}
			for _, f := range []func(int) error{whole, alone, gov} { // warm up
				if err := f(0); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			// The arms alternate op by op, each after a collection, so that
			// drift and the garbage of one arm are not charged to another.
			var w, v, g arm
			arms := []struct {
				dst *arm
				f   func(int) error
			}{{&w, whole}, {&g, gov}}
			if format == embed.EncodingFloat {
				arms = append(arms, struct {
					dst *arm
					f   func(int) error
				}{&v, alone})
			}
			// Each op's ratio too: their median is what a load spike on the
			// shared machine moves least.
			var perUnmarshal, perVectors []float64
			for range b.N {
				took := map[*arm]time.Duration{}
				for _, x := range arms {
					a, err := measure(1, 1, x.f)
					if err != nil {
						b.Fatal(err)
					}
					took[x.dst] = a.elapsed
					x.dst.elapsed += a.elapsed
					x.dst.allocs += a.allocs
					x.dst.bytes += a.bytes
					x.dst.ops += a.ops
				}
				perUnmarshal = append(perUnmarshal, float64(took[&g])/float64(took[&w]))
				if took[&v] > 0 {
					perVectors = append(perVectors, float64(took[&g])/float64(took[&v]))
				}
				arms[0], arms[len(arms)-1] = arms[len(arms)-1], arms[0] // vary who goes first
			}
			b.ReportMetric(median(perUnmarshal), "embed/unmarshal-median")
			if len(perVectors) > 0 {
				b.ReportMetric(median(perVectors), "embed/vectors-median")
			}
			b.ReportMetric(w.perOp(), "unmarshal-µs/op")
			b.ReportMetric(g.perOp(), "embed-µs/op")
			b.ReportMetric(g.perOp()/w.perOp(), "embed/unmarshal-time")
			b.ReportMetric(g.bytesPerOp()/float64(len(answer)), "embed-B/answer-B")
			if v.ops > 0 {
				b.ReportMetric(v.perOp(), "vectors-µs/op")
				b.ReportMetric(g.perOp()/v.perOp(), "embed/vectors-time")
			}
			b.ReportMetric(float64(len(answer))/(1<<20), "answer-MiB")
		})
	}
}
