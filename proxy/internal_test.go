package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pass@api.example/v1?key=sk-123#frag": "https://api.example/v1",
		"http://127.0.0.1:8000/v1":                         "http://127.0.0.1:8000/v1",
		"::not a url":                                      "(unparseable)",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCleanID(t *testing.T) {
	for in, want := range map[string]string{"abc-1.2_3:4": "abc-1.2_3:4", "": "", "a b": "", "x\r\ny": "", string(make([]byte, 129)): ""} {
		if got := cleanID(in); got != want {
			t.Errorf("cleanID(%q) = %q", in, got)
		}
	}
}

func TestClientLimiterBoundedWithIdleEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newClientLimiter(1, 2, 3, func() time.Time { return now })
	for _, k := range []string{"a", "b", "c"} {
		if ok, _ := l.allow(k); !ok {
			t.Fatal(k)
		}
	}
	// Full map, nobody idle long enough: one arbitrary bucket goes.
	if ok, _ := l.allow("d"); !ok || l.size() != 3 {
		t.Fatalf("size %d", l.size())
	}
	// After the refill time every bucket is full again: all are evicted.
	now = now.Add(3 * time.Second)
	if ok, _ := l.allow("e"); !ok || l.size() != 1 {
		t.Fatalf("idle buckets not evicted: size %d", l.size())
	}
	// Exhaust e: the wait is the time to one token.
	l.allow("e")
	ok, wait := l.allow("e")
	if ok || wait != time.Second {
		t.Fatalf("allow = %v, wait %v", ok, wait)
	}
	now = now.Add(time.Second)
	if ok, _ := l.allow("e"); !ok {
		t.Fatal("bucket did not refill")
	}
}

func TestMapErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{&polygateway.RequestRejectedError{Code: "content_filter", Message: "no"}, http.StatusBadRequest, "content_filter"},
		{&polygateway.GatewayUnavailableError{Reason: core.ReasonRetryExhausted, RetryAfter: 1500 * time.Millisecond}, http.StatusServiceUnavailable, "retry_exhausted"},
		{&polygateway.GatewayUnavailableError{Reason: core.ReasonQueueDeadline, RetryAfter: 2 * time.Second}, http.StatusServiceUnavailable, "queue_deadline"},
		{&polygateway.ResultInvalidError{Message: "bad json"}, http.StatusUnprocessableEntity, "result_invalid"},
		{&polygateway.GovernanceBackendError{Backend: "limiter", Op: "acquire", Err: errors.New("redis down")}, http.StatusServiceUnavailable, "governance_backend_unavailable"},
		{&polygateway.TransientError{Reason: core.ReasonTimeout}, http.StatusBadGateway, "timeout"},
		{polygateway.ErrClientClosed, http.StatusServiceUnavailable, "server_shutting_down"},
		{errors.New("boom"), http.StatusInternalServerError, "internal_error"},
	} {
		e := mapError(tc.err, false)
		if e.status != tc.status || e.code != tc.code {
			t.Errorf("%v: %d %s, want %d %s", tc.err, e.status, e.code, tc.status, tc.code)
		}
	}
	if e := mapError(&polygateway.GatewayUnavailableError{RetryAfter: 1500 * time.Millisecond}, false); retryAfterSeconds(e.retryAfter) != "2" {
		t.Errorf("Retry-After %s, want 2 (ceil)", retryAfterSeconds(e.retryAfter))
	}
	if e := mapError(errors.New("x"), true); e.status != StatusClientClosedRequest {
		t.Errorf("gone client: %d", e.status)
	}
}

// A call whose deadline the admission queue cannot meet is a 503 whose
// Retry-After is the queue's estimate (rounded up, at least 1 s) and whose
// message tells the counts, never "internal error".
func TestAQueueDeadlineIsA503WithTheEstimateAsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		estimate   time.Duration
		retryAfter string
	}{
		{2500 * time.Millisecond, "3"},
		{0, "1"}, // no interval between admissions yet
	} {
		late := &core.QueueDeadlineError{Ahead: 7, Estimate: tc.estimate, Left: time.Second}
		err := &polygateway.GatewayUnavailableError{Scope: "LLM", Reason: core.ReasonQueueDeadline, RetryAfter: tc.estimate, Err: late}
		w := httptest.NewRecorder()
		writeAPIError(w, mapError(err, false))
		var body struct {
			Error struct{ Message, Type, Code string }
		}
		if jerr := json.Unmarshal(w.Body.Bytes(), &body); jerr != nil || w.Code != http.StatusServiceUnavailable ||
			body.Error.Type != "service_unavailable_error" || body.Error.Code != "queue_deadline" {
			t.Errorf("estimate %v: %d %s (%v); want 503 service_unavailable_error queue_deadline", tc.estimate, w.Code, w.Body, jerr)
		}
		if got := w.Header().Get("Retry-After"); got != tc.retryAfter {
			t.Errorf("estimate %v: Retry-After %q, want %q", tc.estimate, got, tc.retryAfter)
		}
		if m := body.Error.Message; !strings.Contains(m, "unavailable (queue_deadline)") || !strings.Contains(m, "7 calls ahead") || strings.Contains(m, "internal error") {
			t.Errorf("estimate %v: message %q; want the reason and the calls ahead", tc.estimate, m)
		}
	}
}

func TestKeyLimiterKeepsKeysApartAndBoundsIDs(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	l := newKeyLimiter(2, tokenRate{1, 2}, tokenRate{1, 1}, 4, clock)
	// Key 0 floods ids: its total allows two, its id buckets stay at 4.
	admitted := 0
	for i := range 100 {
		if ok, _ := l.allow(0, "id-"+strconv.Itoa(i)); ok {
			admitted++
		}
	}
	if admitted != 2 || l.idBuckets(0) != 4 || l.idBuckets(1) != 0 {
		t.Fatalf("admitted %d, id buckets %d and %d; want 2, 4 and 0", admitted, l.idBuckets(0), l.idBuckets(1))
	}
	// Key 1 is untouched: its first id has one token, the key two.
	if ok, _ := l.allow(1, "a"); !ok {
		t.Fatal("key 1 refused")
	}
	ok, wait := l.allow(1, "a")
	if ok || wait != time.Second {
		t.Fatalf("key 1 id a again = %v, wait %v; want a refusal for 1 s", ok, wait)
	}
	// The refusal of id a took nothing from the key: id b gets its token.
	if ok, _ := l.allow(1, "b"); !ok {
		t.Fatal("key 1 id b refused: the refused request spent the key's token")
	}
	// No id: only the key's bucket, now empty.
	if ok, wait := l.allow(1, ""); ok || wait != time.Second {
		t.Fatalf("key 1 without id = %v, %v", ok, wait)
	}
	now = now.Add(2 * time.Second)
	if ok, _ := l.allow(1, ""); !ok {
		t.Fatal("key 1 did not refill")
	}
}

func TestCountElements(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{`[]`, 0}, {` [ ] `, 0}, {`["a"]`, 1}, {`["a","b"]`, 2}, {`[1,2,3]`, 3},
		{`["a,b","c\"],d"]`, 2}, {`[["x","y"],{"a":[1,2]},"z"]`, 3}, {`[[]]`, 1}, {`[{}]`, 1},
		{`["\\",""]`, 2}, {"[\n\"a\" ,\n\t\"b\"\n]", 2}, {`[null,true,false]`, 3},
	} {
		if got := countElements([]byte(tc.raw), 100); got != tc.want {
			t.Errorf("countElements(%s) = %d, want %d", tc.raw, got, tc.want)
		}
	}
	if got := countElements([]byte(`[1,2,3,4,5,6]`), 3); got != 4 {
		t.Errorf("countElements beyond the limit = %d, want 4 (limit+1)", got)
	}
}

// FuzzCountElements holds countElements to encoding/json on any valid
// array, read as a request body is read, in reads of the sizes split gives.
func FuzzCountElements(f *testing.F) {
	for _, s := range []string{`[]`, `["a","b"]`, `[["x"],{"a":[1,2]},"z"]`, `["\\\"",",",""]`, `[1 , 2]`, `"a"`, `{}`} {
		f.Add(s, []byte{4})
	}
	f.Fuzz(func(t *testing.T, s string, split []byte) {
		if read, aerr := readVia(&testkit.SplitReader{Data: []byte(s), Sizes: split, Mod: 61}, -1); aerr != nil || string(read) != s {
			t.Fatalf("%q read in pieces %v: %q, %+v", s, split, read, aerr)
		}
		var elems []json.RawMessage
		if json.Unmarshal([]byte(s), &elems) != nil || len(bytes.TrimSpace([]byte(s))) == 0 || bytes.TrimSpace([]byte(s))[0] != '[' {
			return
		}
		raw := bytes.TrimSpace([]byte(s))
		if got := countElements(raw, 1<<30); got != len(elems) {
			t.Fatalf("countElements(%s) = %d, encoding/json finds %d", s, got, len(elems))
		}
		if lim := len(elems) - 1; lim >= 0 {
			if got := countElements(raw, lim); got != lim+1 {
				t.Fatalf("countElements(%s, %d) = %d, want %d", s, lim, got, lim+1)
			}
		}
	})
}

// TestMillionInputsAreRefusedBeforeAllocatingPerInput: decoding the input
// of a request with 10^6 strings under a 2048 bound allocates nothing per
// input (encoding/json would allocate a million strings).
func TestMillionInputsAreRefusedBeforeAllocatingPerInput(t *testing.T) {
	body := []byte(`{"model":"m","input":[` + strings.Repeat(`"text",`, 999_999) + `"text"]}`)
	req, err := parseEmbed(body)
	if err != nil {
		t.Fatal(err)
	}
	var re *requestError
	if err := req.decodeInput(2048); !errors.As(err, &re) || re.code != "too_many_inputs" || re.param != "input" {
		t.Fatalf("decodeInput = %v, want too_many_inputs", err)
	}
	if n := testing.AllocsPerRun(5, func() { _ = req.decodeInput(2048) }); n > 5 {
		t.Errorf("refusing 10^6 inputs took %.0f allocations", n)
	}
	if err := req.decodeInput(1_000_000); err != nil || len(req.input) != 1_000_000 {
		t.Errorf("at the bound: %v, %d inputs", err, len(req.input))
	}
}
