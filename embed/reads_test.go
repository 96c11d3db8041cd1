package embed_test

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/embed"
	pt "github.com/polygateway/polygateway/polygatewaytest"
)

// smallReads is an http.RoundTripper whose answers' bodies are delivered
// in reads of at most size bytes, as a slow network delivers them.
type smallReads struct {
	base http.RoundTripper
	size int
}

func (s smallReads) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if err == nil {
		resp.Body = &chunkedBody{ReadCloser: resp.Body, size: s.size}
	}
	return resp, err
}

type chunkedBody struct {
	io.ReadCloser
	size int
}

func (c *chunkedBody) Read(p []byte) (int, error) {
	return c.ReadCloser.Read(p[:min(len(p), c.size)])
}

// TestEmbedReadsAnswersDeliveredInSmallReads embeds 300 texts (5 batches
// of 64 vectors of 16 values, the public fake's defaults) through
// embed.FromEnv against polygatewaytest, with every answer's body
// delivered in reads of 1 to 13 bytes, float and base64: every read
// boundary of the answer — after a key, before its colon, inside a number
// or a base64 string — is met, and every call returns every vector.
func TestEmbedReadsAnswersDeliveredInSmallReads(t *testing.T) {
	t.Parallel()
	srv := pt.New()
	t.Cleanup(srv.Close)
	in := texts(300)
	for _, format := range []string{"float", "base64"} {
		for _, size := range []int{1, 2, 3, 5, 7, 11, 13} {
			env := srv.Env("EMBED")
			env["EMBED__BATCH_SIZE"] = "64"
			env["EMBED__ENCODING_FORMAT"] = format
			hc := &http.Client{Transport: smallReads{base: http.DefaultTransport, size: size}}
			c, err := embed.FromEnv("EMBED", polygateway.WithEnv(env), polygateway.WithHTTPClient(hc))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Embed(ctxT(t), in)
			_ = c.Close()
			if err != nil {
				t.Fatalf("%s in reads of %d bytes: %v", format, size, err)
			}
			for i, v := range resp.Vectors {
				want := pt.EmbeddingFor(in[i], pt.DefaultEmbeddingDim)
				if len(v) != len(want) {
					t.Fatalf("%s, reads of %d: vector %d has %d values", format, size, i, len(v))
				}
				for k := range v {
					if v[k] != want[k] {
						t.Fatalf("%s, reads of %d: vector %d[%d] = %v, want %v", format, size, i, k, v[k], want[k])
					}
				}
			}
		}
	}
}

// countingBudget is a core.MemoryBudget of limit bytes that remembers the
// most it held.
type countingBudget struct {
	mu                    sync.Mutex
	limit, used, peak     int64
	reserves, refusals    int
	released, overRelease int64
}

func (b *countingBudget) Reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		b.refusals++
		return false
	}
	b.used += n
	b.reserves++
	b.peak = max(b.peak, b.used)
	return true
}

func (b *countingBudget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.released += n
	if b.used < 0 {
		b.overRelease = -b.used
	}
}

func (b *countingBudget) state() (used, peak int64, refusals int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, b.refusals
}

var _ core.MemoryBudget = (*countingBudget)(nil)

// TestEmbedReservesItsAnswersOnTheMemoryBudget: with a budget in the
// context, an answer is reserved before it is read — its Content-Length at
// once, or 64 KiB at a time when the length is not known — and given back
// when the call is done; an answer the budget refuses ends the call with
// an error wrapping core.ErrMemoryBudget, without asking the second
// source; without a budget nothing changes.
func TestEmbedReservesItsAnswersOnTheMemoryBudget(t *testing.T) {
	t.Parallel()
	for _, withLength := range []bool{true, false} {
		name := "content-length"
		if !withLength {
			name = "chunked"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, 256, func(f *fakeEmbed) { f.withLength = withLength })
			backup := newFake(t, 256)
			e := env(f.URL(), "8", "EMBED__BACKUP__2__BASE_URL", backup.URL(), "EMBED__BACKUP__2__API_KEY", "sk-b",
				"EMBED__BACKUP__2__MODEL", "text-embedding-test", "EMBED__BACKUP__2__TIMEOUT_S", "10", "EMBED__BACKUP__2__PRIORITY", "1")
			c := newClient(t, e)
			in := texts(8)

			// Room for the answer: reserved while read, all given back.
			roomy := &countingBudget{limit: 1 << 30}
			if _, err := c.Embed(core.WithMemoryBudget(ctxT(t), roomy), in); err != nil {
				t.Fatal(err)
			}
			used, peak, _ := roomy.state()
			if used != 0 || roomy.overRelease != 0 {
				t.Errorf("after the call %d bytes are still reserved (over-released %d)", used, roomy.overRelease)
			}
			size := int64(len(f.answer(fakeReq{Model: "text-embedding-test", Input: in, Format: "float"})))
			switch {
			case withLength && (peak != size || roomy.reserves != 1):
				t.Errorf("an answer of %d bytes with a Content-Length: %d bytes reserved in %d reservations, want its length at once", size, peak, roomy.reserves)
			case !withLength && (peak < size || peak%(64<<10) != 0):
				t.Errorf("a chunked answer of %d bytes: %d bytes reserved, want 64 KiB at a time, at least its size", size, peak)
			}

			// No room: the call ends, the backup is never asked.
			tight := &countingBudget{limit: 1 << 10}
			_, err := c.Embed(core.WithMemoryBudget(ctxT(t), tight), in)
			var rejected *polygateway.RequestRejectedError
			if !errors.Is(err, core.ErrMemoryBudget) || !errors.As(err, &rejected) {
				t.Fatalf("err = %v, want a rejection wrapping ErrMemoryBudget", err)
			}
			if used, _, refusals := tight.state(); used != 0 || refusals != 1 {
				t.Errorf("after the refusal %d bytes are reserved, %d refusals", used, refusals)
			}
			if n := len(backup.requests()); n != 0 {
				t.Errorf("the backup was asked %d times after the budget refused the answer", n)
			}

			// No budget in the context: the call is what it always was.
			if _, err := c.Embed(ctxT(t), in); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEmbedHoldsBatchMemoryUntilTheCallIsDone: the answers of a call's
// batches stay reserved until Embed returns (their vectors are still
// held), so a budget with room for one batch's answer but not two refuses
// the second batch.
func TestEmbedHoldsBatchMemoryUntilTheCallIsDone(t *testing.T) {
	t.Parallel()
	f := newFake(t, 256)
	c := newClient(t, env(f.URL(), "4"))
	one := &countingBudget{limit: 1 << 30}
	if _, err := c.Embed(core.WithMemoryBudget(ctxT(t), one), texts(4)); err != nil {
		t.Fatal(err)
	}
	_, peak, _ := one.state()
	two := &countingBudget{limit: peak + peak/2}
	_, err := c.Embed(core.WithMemoryBudget(ctxT(t), two), texts(8))
	var be *embed.BatchError
	if !errors.Is(err, core.ErrMemoryBudget) || !errors.As(err, &be) || be.Batch != 1 {
		t.Fatalf("err = %v, want batch 1 refused by the budget", err)
	}
	if used, _, _ := two.state(); used != 0 {
		t.Errorf("%d bytes still reserved after the call", used)
	}
}
