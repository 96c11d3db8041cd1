// Command embedbatch embeds a corpus with the embed client: the texts of a
// file (one per line) or a generated corpus of -n texts, in Embed calls of
// at most -call texts, each split by the client into batches of -batch
// texts with -concurrency batches in flight. It prints per call the
// batches, tokens and time, then the throughput, the cost from a pricing
// table and which source answered the batches.
//
// By default it runs offline against two fake OpenAI-compatible servers of
// package polygatewaytest: a primary that answers every -fail-every-th
// request with HTTP 503 and a healthy secondary. A failed batch is sent
// again (the health-aware selector prefers the other source), and the
// vectors are checked against the fake's deterministic ones: order and
// count survive the retries.
//
//	go run ./examples/embedbatch
//	go run ./examples/embedbatch -n 5000 -batch 128 -concurrency 8 -dim 1536
//	go run ./examples/embedbatch -file corpus.txt
//	go run ./examples/embedbatch -file corpus.txt -dotenv .env   # real sources of scope EMBED
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/telemetry"
)

const model = "text-embedding-3-small"

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var (
		file        = flag.String("file", "", "embed the lines of this file (default: a generated corpus)")
		n           = flag.Int("n", 2000, "texts to generate when -file is not given")
		perCall     = flag.Int("call", 500, "texts per Embed call (at most 2048)")
		batch       = flag.Int("batch", 64, "texts per upstream request (BATCH_SIZE)")
		concurrency = flag.Int("concurrency", 4, "batches in flight per call (CONCURRENCY)")
		dim         = flag.Int("dim", 256, "vector length of the fake")
		price       = flag.Float64("price", 0.02, "USD per 1M input tokens of "+model)
		latency     = flag.Duration("latency", 15*time.Millisecond, "latency of every fake request")
		failEvery   = flag.Int("fail-every", 6, "the fake primary answers every k-th request with 503 (0: never)")
		dotenv      = flag.String("dotenv", "", "use the sources of scope EMBED in this .env file instead of the fakes")
	)
	flag.Parse()

	texts, origin, err := corpus(*file, *n)
	if err != nil {
		return err
	}
	sink := telemetry.NewMemory()
	opts := []polygateway.Option{
		polygateway.WithTelemetry(sink),
		polygateway.WithPricing(polygateway.PricingTable{model: {InputPer1M: *price}}),
	}
	var failures atomic.Int64
	fake := *dotenv == ""
	if fake {
		primary := polygatewaytest.New(polygatewaytest.WithEmbeddingDim(*dim),
			polygatewaytest.WithFunc(func(r polygatewaytest.RequestInfo) polygatewaytest.Behavior {
				if *failEvery > 0 && r.Index%*failEvery == *failEvery-1 {
					failures.Add(1)
					return polygatewaytest.ServerError(503).WithLatency(*latency)
				}
				return polygatewaytest.OK().WithLatency(*latency)
			}))
		defer primary.Close()
		secondary := polygatewaytest.New(polygatewaytest.WithEmbeddingDim(*dim),
			polygatewaytest.WithBehavior(polygatewaytest.OK().WithLatency(*latency)))
		defer secondary.Close()

		env := primary.Env("EMBED", polygatewaytest.EnvModel(model))
		maps.Copy(env, secondary.Env("EMBED", polygatewaytest.EnvSource("openai", 2), polygatewaytest.EnvModel(model)))
		maps.Copy(env, map[string]string{
			"EMBED__BATCH_SIZE":            fmt.Sprint(*batch),
			"EMBED__CONCURRENCY":           fmt.Sprint(*concurrency),
			"EMBED__RETRY__BACKOFF_BASE_S": "0.02",
			"EMBED__RETRY__BACKOFF_MAX_S":  "0.1",
			"EMBED__BREAKER__MIN_CALLS":    "1000", // a flaky source stays in rotation; its failures only move batches
		})
		opts = append(opts, polygateway.WithEnv(env))
	} else {
		opts = append(opts, polygateway.WithDotEnv(*dotenv))
	}

	client, err := embed.FromEnv("EMBED", opts...)
	if err != nil {
		return err
	}
	cfg := client.Config()
	fmt.Printf("== embedbatch: %d texts (%s), calls of %d, batches of %d, %d in flight\n",
		len(texts), origin, *perCall, cfg.BatchSize, cfg.Concurrency)

	ctx := context.Background()
	start := time.Now()
	var (
		vectors [][]float32
		tokens  int
		cost    float64
		priced  = true
		calls   int
	)
	for off := 0; off < len(texts); off += *perCall {
		part := texts[off:min(off+*perCall, len(texts))]
		resp, err := client.Embed(ctx, part, polygateway.WithSessionID("embedbatch"))
		if err != nil {
			var be *embed.BatchError
			if errors.As(err, &be) {
				return fmt.Errorf("texts %d..%d: batch %d (texts %d..%d) failed: %w", off, off+len(part)-1,
					be.Batch, off+be.Offset, off+be.Offset+be.Count-1, err)
			}
			return err
		}
		calls++
		vectors = append(vectors, resp.Vectors...)
		tokens += resp.PromptTokens
		if resp.Cost == nil {
			priced = false
		} else {
			cost += *resp.Cost
		}
		fmt.Printf("call %-3d texts %5d..%-5d %3d batches %7d tokens (%s) %8v\n", calls, off, off+len(part)-1,
			len(resp.BatchCallIDs), resp.PromptTokens, resp.UsageSource, resp.Latency.Round(time.Millisecond))
	}
	elapsed := time.Since(start)
	_ = client.Close() // flushes the telemetry rows

	bySource := map[string]int{}
	for _, row := range sink.Records() {
		if row.Error == "" {
			bySource[row.SourceName]++
		}
	}
	fmt.Println("== totals")
	fmt.Printf("vectors:   %d of %d dimensions\n", len(vectors), dimOf(vectors))
	fmt.Printf("tokens:    %d\n", tokens)
	fmt.Printf("elapsed:   %v: %.0f texts/s, %.0f tokens/s\n", elapsed.Round(time.Millisecond),
		float64(len(texts))/elapsed.Seconds(), float64(tokens)/elapsed.Seconds())
	if priced {
		fmt.Printf("cost:      $%.6f (%d tokens at $%g per 1M)\n", cost, tokens, *price)
	} else {
		fmt.Println("cost:      unknown: some batch's model has no price")
	}
	fmt.Printf("batches:   %s\n", counts(bySource))
	if fake {
		fmt.Printf("retries:   %d batches got a 503 from openai_1 and were sent again\n", failures.Load())
		bad := 0
		for i, v := range vectors {
			if !slices.Equal(v, polygatewaytest.EmbeddingFor(texts[i], *dim)) {
				bad++
			}
		}
		fmt.Printf("checked:   %d of %d vectors are the fake's vector of their own text\n", len(vectors)-bad, len(vectors))
	}
	return nil
}

// corpus returns the non-empty lines of file, or n generated texts.
func corpus(file string, n int) ([]string, string, error) {
	if file == "" {
		return generate(n), "generated", nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			texts = append(texts, line)
		}
	}
	return texts, file, sc.Err()
}

// generate returns n pseudo-random sentences, the same on every run.
func generate(n int) []string {
	words := strings.Fields(`the a invoice customer refund shipment delayed order account password reset
		payment failed card billing address warehouse parcel tracking number support ticket urgent
		please help thanks cancel subscription upgrade plan discount code receipt missing damaged`)
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]string, n)
	for i := range out {
		w := make([]string, 6+rng.IntN(18))
		for j := range w {
			w[j] = words[rng.IntN(len(words))]
		}
		out[i] = fmt.Sprintf("#%d %s", i, strings.Join(w, " "))
	}
	return out
}

func dimOf(vs [][]float32) int {
	if len(vs) == 0 {
		return 0
	}
	return len(vs[0])
}

// counts renders a map as "a=1 b=2", sorted by key.
func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
