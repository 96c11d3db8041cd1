// Command polygateway-fake serves the scriptable fake OpenAI-compatible
// model server of package polygatewaytest as a standalone process, so that
// programs in any language — and the gateway itself — can be tested
// against an upstream that misbehaves on purpose, without a network, keys
// or cost.
//
//	polygateway-fake -addr 127.0.0.1:8401 -inter-token-delay 20ms -fail 429 -retry-after 2 -fail-every 3
//
// It prints one line, "polygateway-fake listening on http://HOST:PORT/v1",
// once it accepts requests (with -addr 127.0.0.1:0 the port is chosen by
// the system: read it there), and serves until SIGINT or SIGTERM:
//
//   - POST /v1/chat/completions, streamed as SSE when the request asks for
//     "stream": true;
//   - POST /v1/embeddings, deterministic vectors (-embedding-dim);
//   - GET /v1/models and /v1/models/{id} (-models).
//
// Every answer takes the shape the flags give it (-latency,
// -first-token-delay, -inter-token-delay, -tokens, -content, -thinking,
// -model, -keep-alive, -no-done, -no-usage). With -fail KIND and
// -fail-every N, every Nth chat or embeddings request (1: every one) fails
// instead, in a way KIND names:
//
//	500, 502, 503 …   that 5xx status (502 and 504 with a proxy's HTML page)
//	429               rate limited, Retry-After: -retry-after seconds
//	reset             the connection is reset before any answer
//	hang              no answer at all until the client gives up
//	cut               a stream cut after -fault-at chunks
//	stall             a stream that stalls for -stall after -fault-at chunks
//	malformed         a stream whose chunk -fault-at is not JSON
//	error-event       a stream with an in-band error event at chunk -fault-at
//	bad-key           401 invalid_api_key
//	context-length    400 context_length_exceeded
//	content-filter    400 content_filter
//	quota             429 insufficient_quota (no Retry-After)
//
// -concurrency-limit N answers requests beyond N in flight with 429 and
// Retry-After: -retry-after. Nothing is logged.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	fake "github.com/polygateway/polygateway/polygatewaytest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// flags are the command's settings.
type flags struct {
	addr                               string
	latency, firstToken, interToken    time.Duration
	keepAlive, stall                   time.Duration
	tokens, embedDim, limit, every, at int
	content, thinking, model, models   string
	fail                               string
	retryAfter                         int
	noDone, noUsage                    bool
}

// run serves until ctx ends and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f flags
	fs := flag.NewFlagSet("polygateway-fake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8401", "listen address (port 0: chosen by the system, printed at start)")
	fs.DurationVar(&f.latency, "latency", 0, "wait before the response headers")
	fs.DurationVar(&f.firstToken, "first-token-delay", 0, "wait before the first token of a stream")
	fs.DurationVar(&f.interToken, "inter-token-delay", 0, "wait between two tokens of a stream")
	fs.DurationVar(&f.keepAlive, "keep-alive", 0, "send ': keep-alive' comments this often during a stream's waits")
	fs.IntVar(&f.tokens, "tokens", 0, "answer with this many tokens (default "+strconv.Itoa(fake.DefaultTokens)+")")
	fs.StringVar(&f.content, "content", "", "answer with this text instead of tokens")
	fs.StringVar(&f.thinking, "thinking", "", "reasoning text sent before the answer")
	fs.StringVar(&f.model, "model", "", "model every answer reports (default: the request's)")
	fs.StringVar(&f.models, "models", "", "comma-separated models GET /v1/models lists (default "+fake.DefaultModel+")")
	fs.IntVar(&f.embedDim, "embedding-dim", fake.DefaultEmbeddingDim, "dimensions of the embedding vectors")
	fs.BoolVar(&f.noDone, "no-done", false, "end streams without data: [DONE]")
	fs.BoolVar(&f.noUsage, "no-usage", false, "leave usage out of answers")
	fs.StringVar(&f.fail, "fail", "", "how failing requests fail: a 5xx status, 429, reset, hang, cut, stall, malformed, error-event, bad-key, context-length, content-filter, quota")
	fs.IntVar(&f.every, "fail-every", 1, "with -fail: every Nth request fails (1: every one)")
	fs.IntVar(&f.retryAfter, "retry-after", 1, "Retry-After seconds of a 429 (-fail 429, -concurrency-limit)")
	fs.IntVar(&f.at, "fault-at", 2, "with -fail cut, stall, malformed or error-event: the chunk it happens at")
	fs.DurationVar(&f.stall, "stall", 10*time.Second, "with -fail stall: how long the stream stalls")
	fs.IntVar(&f.limit, "concurrency-limit", 0, "answer requests beyond this many in flight with 429 (0: no limit)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts, err := f.options()
	if err != nil {
		fmt.Fprintln(stderr, "polygateway-fake:", err)
		return 2
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		fmt.Fprintln(stderr, "polygateway-fake:", err)
		return 1
	}
	srv := fake.New(append(opts, fake.WithListener(ln))...)
	defer srv.Close()
	fmt.Fprintln(stdout, "polygateway-fake listening on", srv.URL())
	<-ctx.Done()
	return 0
}

// options turns the flags into the server's options.
func (f *flags) options() ([]fake.Option, error) {
	if f.every < 1 {
		return nil, fmt.Errorf("-fail-every %d: want 1 or more", f.every)
	}
	if f.retryAfter < 0 {
		return nil, fmt.Errorf("-retry-after %d: want 0 or more", f.retryAfter)
	}
	ok := fake.OK().WithLatency(f.latency).WithFirstTokenDelay(f.firstToken).WithInterTokenDelay(f.interToken).
		WithKeepAlive(f.keepAlive).WithModel(f.model).WithThinking(f.thinking)
	if f.tokens != 0 {
		ok = ok.WithTokens(f.tokens)
	}
	if f.content != "" {
		ok = ok.WithContent(f.content)
	}
	if f.noDone {
		ok = ok.WithoutDone()
	}
	if f.noUsage {
		ok = ok.WithoutUsage()
	}
	retryAfter := strconv.Itoa(f.retryAfter)
	opts := []fake.Option{fake.WithEmbeddingDim(f.embedDim), fake.WithBehavior(ok)}
	if f.models != "" {
		opts = append(opts, fake.WithModels(strings.Split(f.models, ",")...))
	}
	if f.limit > 0 {
		opts = append(opts, fake.WithConcurrencyLimit(f.limit, fake.RateLimited(retryAfter)))
	}
	if f.fail == "" {
		return opts, nil
	}
	failing, err := f.failure(ok, retryAfter)
	if err != nil {
		return nil, err
	}
	var n atomic.Int64
	every := int64(f.every)
	return append(opts, fake.WithFunc(func(fake.RequestInfo) fake.Behavior {
		if n.Add(1)%every == 0 {
			return failing
		}
		return ok
	})), nil
}

// failure is the behavior -fail names; the stream faults keep the answer's
// shape (ok's delays and text).
func (f *flags) failure(ok fake.Behavior, retryAfter string) (fake.Behavior, error) {
	fault := func(b fake.Behavior) fake.Behavior {
		b.Latency, b.FirstTokenDelay, b.InterTokenDelay, b.KeepAlive = ok.Latency, ok.FirstTokenDelay, ok.InterTokenDelay, ok.KeepAlive
		b.Tokens, b.Content, b.Model, b.Thinking = ok.Tokens, ok.Content, ok.Model, ok.Thinking
		return b
	}
	switch f.fail {
	case "429":
		return fake.RateLimited(retryAfter), nil
	case "reset":
		return fake.Reset(), nil
	case "hang":
		return fake.Hang(), nil
	case "cut":
		return fault(fake.CutAfter(f.at)), nil
	case "stall":
		return fault(fake.StallAfter(f.at, f.stall)), nil
	case "malformed":
		return fault(fake.MalformedAt(f.at)), nil
	case "error-event":
		return fault(fake.ErrorEvent(f.at)), nil
	case "bad-key":
		return fake.BadKey(), nil
	case "context-length":
		return fake.ContextLength(), nil
	case "content-filter":
		return fake.ContentFilter(), nil
	case "quota":
		return fake.InsufficientQuota(), nil
	}
	code, err := strconv.Atoi(f.fail)
	if err != nil || code < 500 || code > 599 {
		return fake.Behavior{}, fmt.Errorf("-fail %q: want a status 500-599 or one of 429, reset, hang, cut, stall, malformed, error-event, bad-key, context-length, content-filter, quota", f.fail)
	}
	return fake.ServerError(code).WithLatency(ok.Latency), nil
}
