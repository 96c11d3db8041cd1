package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// gateBound bounds how long anything in these tests waits: an answer held
// at the upstream, a request, a condition polled for.
const gateBound = 10 * time.Second

// gatedUpstream is a fake upstream whose chat answers each wait until the
// test releases one: the test decides when a concurrency slot frees, so
// the order in which the gateway admitted its queued calls is the order
// in which they reached the upstream, whatever the machine's speed.
type gatedUpstream struct {
	*fakeupstream.Server
	release chan struct{}
	open    sync.Once
	mu      sync.Mutex
	tags    []string // each request's last message, in arrival order
}

func newGatedUpstream(t *testing.T) *gatedUpstream {
	g := &gatedUpstream{release: make(chan struct{})}
	g.Server = fake(t, fakeupstream.WithFunc(g.answer))
	return g
}

// answer records the request's tag and holds its answer until a release
// (or gateBound).
func (g *gatedUpstream) answer(r fakeupstream.RequestInfo) fakeupstream.Behavior {
	var req struct{ Messages []struct{ Content string } }
	_ = json.Unmarshal(r.Body, &req)
	tag := ""
	if n := len(req.Messages); n > 0 {
		tag = req.Messages[n-1].Content
	}
	g.mu.Lock()
	g.tags = append(g.tags, tag)
	g.mu.Unlock()
	select {
	case <-g.release:
	case <-time.After(gateBound):
	}
	return fakeupstream.OK().WithTokens(2)
}

// arrived returns the tags of the requests that reached the upstream, in
// order.
func (g *gatedUpstream) arrived() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.tags)
}

// releaseAll lets every held and later answer go at once.
func (g *gatedUpstream) releaseAll() { g.open.Do(func() { close(g.release) }) }

// queueGateway is a gateway whose one chat scope LLM has one source of
// `slots` concurrency slots on a gated upstream.
type queueGateway struct {
	*fixture
	t      *testing.T
	up     *gatedUpstream
	client *polygateway.GatewayClient
	wg     sync.WaitGroup
	mu     sync.Mutex
	status map[string]int // the status each tag's request got
}

func newQueueGateway(t *testing.T, slots int, cfg proxy.Config) *queueGateway {
	up := newGatedUpstream(t)
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model", "MAX_CONCURRENCY", strconv.Itoa(slots))
	c := chatClient(t, "LLM", e)
	cfg.Backends = proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": c}, DefaultScope: "LLM"}
	q := &queueGateway{fixture: serve(t, cfg), t: t, up: up, client: c, status: map[string]int{}}
	// Runs before the server's shutdown: the held answers go, then every
	// request is over.
	t.Cleanup(func() {
		up.releaseAll()
		q.wg.Wait()
	})
	return q
}

// send posts a chat request whose message is tag, with the headers hdr,
// in the background; its status is kept under tag.
func (q *queueGateway) send(tag string, hdr ...string) { q.sendChat(tag, false, hdr...) }

// sendChat is send of a streamed request when stream is set.
func (q *queueGateway) sendChat(tag string, stream bool, hdr ...string) {
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		body, _ := json.Marshal(map[string]any{"model": "m", "stream": stream, "messages": []map[string]string{{"role": "user", "content": tag}}})
		ctx, cancel := context.WithTimeout(context.Background(), 2*gateBound)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", q.ts.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-ID", tag)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := q.ts.Client().Do(req)
		if err != nil {
			q.t.Errorf("request %s: %v", tag, err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		q.mu.Lock()
		q.status[tag] = resp.StatusCode
		q.mu.Unlock()
	}()
}

// queued is the depth of the scope's admission queue, as the client
// reports it.
func (q *queueGateway) queued() core.QueueDepth {
	return q.client.Sources(context.Background())[0].Queued
}

// waitQueued waits until the queue holds want.
func (q *queueGateway) waitQueued(want core.QueueDepth) {
	q.t.Helper()
	testkit.WaitFor(q.t, gateBound, 5*time.Millisecond, "queue depth "+queueString(want), func() bool { return q.queued() == want })
}

// waitArrived waits until n requests have reached the upstream.
func (q *queueGateway) waitArrived(n int) {
	q.t.Helper()
	testkit.WaitFor(q.t, gateBound, 5*time.Millisecond, strconv.Itoa(n)+" upstream arrivals", func() bool { return len(q.up.arrived()) >= n })
}

// admitNext releases one held answer and waits for the queued call that
// takes the freed slot to reach the upstream; it returns that call's tag.
func (q *queueGateway) admitNext() string {
	q.t.Helper()
	n := len(q.up.arrived())
	select {
	case q.up.release <- struct{}{}:
	case <-time.After(gateBound):
		q.t.Fatal("no answer was held at the upstream")
	}
	q.waitArrived(n + 1)
	return q.up.arrived()[n]
}

// finish lets every answer go and waits for every request, then checks
// that each got 200.
func (q *queueGateway) finish() {
	q.t.Helper()
	q.up.releaseAll()
	q.wg.Wait()
	q.mu.Lock()
	defer q.mu.Unlock()
	for tag, st := range q.status {
		if st != http.StatusOK {
			q.t.Errorf("request %s: status %d, want 200", tag, st)
		}
	}
}

func queueString(d core.QueueDepth) string {
	b, _ := json.Marshal(map[string]int{"interactive": d[core.PriorityInteractive], "normal": d[core.PriorityNormal], "batch": d[core.PriorityBatch]})
	return string(b)
}

func depth(interactive, normal, batch int) core.QueueDepth {
	var d core.QueueDepth
	d[core.PriorityInteractive], d[core.PriorityNormal], d[core.PriorityBatch] = interactive, normal, batch
	return d
}

func TestAnInteractiveRequestOvertakesQueuedBatchRequests(t *testing.T) {
	t.Parallel()
	q := newQueueGateway(t, 2, proxy.Config{})
	q.send("hold-1", "X-PolyGateway-Priority", "batch")
	q.send("hold-2", "X-PolyGateway-Priority", "batch")
	q.waitArrived(2)
	const batch = 20
	for i := range batch {
		q.send("batch-"+strconv.Itoa(i), "X-PolyGateway-Priority", "batch")
	}
	q.waitQueued(depth(0, 0, batch))

	// A priority the gateway does not know is refused at once, not queued.
	resp, body := q.do("POST", "/v1/chat/completions", chatBody("m", false, ""), "X-PolyGateway-Priority", "urgent")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("X-PolyGateway-Priority: urgent: %d %s, want 400", resp.StatusCode, body)
	}

	q.send("interactive", "X-PolyGateway-Priority", "interactive")
	q.waitQueued(depth(1, 0, batch))
	next := []string{q.admitNext(), q.admitNext()}
	if !slices.Contains(next, "interactive") {
		t.Errorf("admitted after the interactive request queued: %v; want it among the next 2, ahead of %d queued batch requests", next, batch)
	}
	q.finish()
	if got := q.up.arrived(); len(got) != batch+3 {
		t.Errorf("the upstream saw %d requests, want %d", len(got), batch+3)
	}
}

func TestTenantsAreServedInTurn(t *testing.T) {
	t.Parallel()
	q := newQueueGateway(t, 2, proxy.Config{})
	q.send("hold-1")
	q.send("hold-2")
	q.waitArrived(2)
	// Tenant a queues first and most, then b, then c; each request is
	// queued before the next is sent, so the queue's order is known.
	n := 0
	for _, tc := range []struct {
		tenant string
		count  int
	}{{"a", 6}, {"b", 3}, {"c", 1}} {
		for i := range tc.count {
			q.send(tc.tenant+"-"+strconv.Itoa(i), "X-Client-Id", tc.tenant)
			n++
			q.waitQueued(depth(0, n, 0))
		}
	}
	var got []string
	for range n {
		got = append(got, q.admitNext())
	}
	want := []string{"a-0", "b-0", "c-0", "a-1", "b-1", "a-2", "b-2", "a-3", "a-4", "a-5"}
	if !slices.Equal(got, want) {
		t.Errorf("admission order %v, want the tenants in turn %v", got, want)
	}
	q.finish()
}

func TestProvidersShowTheQueueDepthByClass(t *testing.T) {
	t.Parallel()
	q := newQueueGateway(t, 1, proxy.Config{AdminToken: "admin-token", ClientKeys: []string{"client-key"}})
	client := []string{"Authorization", "Bearer client-key"}
	q.send("hold", append(client, "X-PolyGateway-Priority", "batch")...)
	q.waitArrived(1)
	q.send("batch-0", append(client, "X-PolyGateway-Priority", "batch")...)
	q.send("batch-1", append(client, "X-PolyGateway-Priority", "batch")...)
	q.send("interactive", append(client, "X-PolyGateway-Priority", "interactive")...)
	q.waitQueued(depth(1, 0, 2))
	for _, auth := range []string{"client-key", "admin-token"} {
		resp, body := q.do("GET", "/v1/providers", "", "Authorization", "Bearer "+auth)
		var prov struct {
			Data []struct {
				Name   string
				Queued map[string]int
			}
		}
		if err := json.Unmarshal(body, &prov); err != nil || resp.StatusCode != http.StatusOK || len(prov.Data) != 1 {
			t.Fatalf("/v1/providers with %s: %d %s (%v)", auth, resp.StatusCode, body, err)
		}
		want := map[string]int{"interactive": 1, "normal": 0, "batch": 2}
		if got := prov.Data[0].Queued; len(got) != len(want) || got["interactive"] != 1 || got["normal"] != 0 || got["batch"] != 2 {
			t.Errorf("/v1/providers with %s: queued %v, want %v", auth, got, want)
		}
	}
	q.finish()
}

func TestARequestThatWaitedInTheQueueLogsItsWait(t *testing.T) {
	t.Parallel()
	q := newQueueGateway(t, 1, proxy.Config{})
	q.send("first")
	q.waitArrived(1)
	q.send("waited")
	q.waitQueued(depth(0, 1, 0))
	q.sendChat("waited-stream", true)
	q.waitQueued(depth(0, 2, 0))
	if got := []string{q.admitNext(), q.admitNext()}; !slices.Equal(got, []string{"waited", "waited-stream"}) {
		t.Fatalf("admitted %q, want the queued requests", got)
	}
	q.finish()
	lines := map[string]map[string]any{}
	for _, l := range bytes.Split([]byte(q.logs.String()), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil && m["msg"] == "request" {
			lines[m["request_id"].(string)] = m
		}
	}
	for _, id := range []string{"waited", "waited-stream"} {
		if w, ok := lines[id]["queue_wait_ms"].(float64); !ok || w <= 0 {
			t.Errorf("log line of the request that waited: %v; want a queue_wait_ms above 0", lines[id])
		}
	}
	if w, ok := lines["first"]["queue_wait_ms"]; ok || lines["first"] == nil {
		t.Errorf("log line of the request that found a free slot: %v; want no queue_wait_ms (got %v)", lines["first"], w)
	}
}

func TestARequestWhoseDeadlineTheQueueCannotMeetGets503AtOnce(t *testing.T) {
	t.Parallel()
	q := newQueueGateway(t, 1, proxy.Config{})
	q.send("hold", "X-PolyGateway-Priority", "batch")
	q.waitArrived(1)
	const batch = 10
	for i := range batch {
		q.send("batch-"+strconv.Itoa(i), "X-PolyGateway-Priority", "batch")
	}
	q.waitQueued(depth(0, 0, batch))
	// The held answer takes its service time: the queue learns an interval
	// between admissions of at least that much.
	const service = 100 * time.Millisecond
	time.Sleep(service)
	q.admitNext()
	// batch-1 waiting calls are ahead, each admitted after that interval: far
	// past a 0.5 s deadline.
	resp, body := q.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"late"}]}`,
		"X-PolyGateway-Priority", "batch", "X-PolyGateway-Timeout", "0.5", "X-Request-ID", "late")
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
		e.Error.Type != "service_unavailable_error" || e.Error.Code != "queue_deadline" {
		t.Errorf("%d %s (%v); want 503 queue_deadline", resp.StatusCode, body, err)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q; want the queue's estimate in whole seconds", resp.Header.Get("Retry-After"))
	}
	q.finish()
	if slices.Contains(q.up.arrived(), "late") {
		t.Error("the refused request reached the upstream")
	}
}
