package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// The answer every healthy source gives: answerTokens words; the faults
// mid-stream strike after faultAt of them.
const (
	answerTokens = 40
	faultAt      = 20
)

// flap is the flapping primary's outage, and how long calls are sent to
// it (the recovery promise: its traffic back within flapBack of its
// recovery).
const (
	flapOutage = 4 * time.Second
	flapRun    = 16 * time.Second
	flapEvery  = 250 * time.Millisecond
	flapBack   = 10 * time.Second
)

// scenario is one fault pattern: a primary that misbehaves and a healthy
// fallback in the next tier, unless it says otherwise.
type scenario struct {
	pattern string
	// note says what the outcome should be and why.
	note string
	// primary and fallback build the fakes' behaviour for one run; a nil
	// fallback is a healthy source that also continues a prefill.
	primary, fallback func(r *scenarioRun) []fakeupstream.Option
	// overrides sets source fields in both runs, by role (the scenario's
	// topology, e.g. the fallback's MODEL).
	overrides func(p *profile) [2]map[string]string
	// calls are the requests sent one after the other (true: streamed);
	// nil is one streamed call.
	calls []bool
	// drive replaces calls: it sends requests with r.send.
	drive func(r *scenarioRun)
	// check judges what the upstreams saw, after the calls: it returns the
	// outcome it found (rescued when all is as it must be) and a remark,
	// added to the run's (it may also rewrite r.remark).
	check func(r *scenarioRun) (outcome, string)
}

// answer is the complete answer.
var answer = fakeupstream.Tokens(answerTokens)

// words returns tokens i..n-1 of the answer as they continue a prefix:
// " tok20 tok21 …".
func words(i, n int) string {
	var b strings.Builder
	for ; i < n; i++ {
		fmt.Fprintf(&b, " tok%d", i)
	}
	return b.String()
}

// prefill returns the trailing assistant message of a request (the text
// to continue), if it ends with one.
func prefill(body []byte) (string, bool) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return "", false
	}
	last := req.Messages[len(req.Messages)-1]
	return last.Content, last.Role == "assistant"
}

// continuer answers with the complete answer, or, asked to continue a
// prefill (the trailing assistant message, in any of the dialects), with
// the rest of it. With refuse it answers a continuation with a 400, as a
// server that cannot continue does.
func continuer(refuse bool) []fakeupstream.Option {
	return continuerThat(refuse, false)
}

// anewContinuer accepts a continuation but ignores its prefill and
// answers from the first word, as a server that does not continue but
// takes the request does.
func anewContinuer() []fakeupstream.Option { return continuerThat(false, true) }

// continuerThat is continuer, or with anew anewContinuer.
func continuerThat(refuse, anew bool) []fakeupstream.Option {
	return []fakeupstream.Option{fakeupstream.WithFunc(func(ri fakeupstream.RequestInfo) fakeupstream.Behavior {
		text, ok := prefill(ri.Body)
		switch {
		case !ok:
			return fakeupstream.OK().WithTokens(answerTokens)
		case anew:
			return fakeupstream.OK().WithTokens(answerTokens)
		case refuse:
			return fakeupstream.Status(http.StatusBadRequest,
				`{"error":{"message":"continuing an assistant message is not supported","type":"invalid_request_error","param":null,"code":"prefill_unsupported"}}`, nil)
		}
		return fakeupstream.OK().WithContent(words(len(strings.Fields(text)), answerTokens))
	})}
}

// behave answers every request with the script bs (the last one repeats).
func behave(bs ...fakeupstream.Behavior) func(*scenarioRun) []fakeupstream.Option {
	return func(*scenarioRun) []fakeupstream.Option { return []fakeupstream.Option{fakeupstream.WithScript(bs...)} }
}

var ok = fakeupstream.OK().WithTokens(answerTokens)

// scenarios are the fault patterns, in the table's order.
var scenarios = []*scenario{
	{
		pattern: "429 with Retry-After: 1",
		note:    "A 429 whose Retry-After is within the tier patience is waited for: the primary answers.",
		primary: behave(fakeupstream.RateLimited("1"), ok),
	},
	{
		pattern: "429 without Retry-After (every time)",
		note:    "A throttled primary without a hint: the fallback answers, the primary is not hammered.",
		primary: behave(fakeupstream.RateLimited("")),
		calls:   []bool{true, true, true},
	},
	{
		pattern: "429 without Retry-After, ten calls in a row",
		note:    "A primary that answers every request 429 is asked at most 4 times in any 3 s by all the calls together, and every call is answered by the fallback.",
		primary: behave(fakeupstream.RateLimited("")),
		calls:   []bool{true, true, false, true, true, false, true, true, false, true},
		check: func(r *scenarioRun) (outcome, string) {
			n := r.upstream[0].MostArrivalsWithin(3 * time.Second)
			remark := fmt.Sprintf("at most %d primary requests in any 3 s (%d in all)", n, len(r.upstream[0].Arrivals()))
			if n > 4 {
				return wrong, remark + ": the throttled primary was hammered"
			}
			return rescued, remark
		},
	},
	{
		pattern: "500 once",
		note:    "A blip of a healthy primary is retried there: the primary answers.",
		primary: behave(fakeupstream.ServerError(500), ok),
	},
	{
		pattern: "503 forever",
		note:    "The fallback answers every call; after the first, calls do not wait for the primary.",
		primary: behave(fakeupstream.ServerError(503)),
		calls:   []bool{true, true, false, true, true},
	},
	{
		pattern: "connection reset (every time)",
		note:    "Reset before any byte: retried, then the fallback answers.",
		primary: behave(fakeupstream.Reset()),
		calls:   []bool{true, true},
	},
	{
		pattern: "silence (headers and keep-alives, no first token)",
		note:    "The TTFT watchdog fails over to the fallback; the time is the watchdog's.",
		primary: behave(fakeupstream.OK().WithFirstTokenDelay(10 * time.Minute).WithKeepAlive(time.Second)),
		calls:   []bool{true, true},
	},
	{
		pattern: "slow first token (8 s, within the watchdog)",
		note:    "Slow but within the TTFT limit and the budget: it must be answered, by the primary.",
		primary: behave(fakeupstream.OK().WithTokens(answerTokens).WithFirstTokenDelay(8 * time.Second)),
	},
	{
		pattern: "cut mid-stream",
		note:    "Cut after 20 of 40 words had been relayed: only a continuation can complete the answer; without one, an error event and no [DONE].",
		primary: behave(fakeupstream.CutAfter(faultAt).WithTokens(answerTokens)),
	},
	{
		pattern: "stall mid-stream",
		note:    "Silent after 20 words: the inter-token watchdog ends the attempt, then as for a cut.",
		primary: behave(fakeupstream.StallAfter(faultAt, 2*time.Minute).WithTokens(answerTokens)),
	},
	{
		pattern: "malformed event mid-stream",
		note:    "A broken event that may hold part of the answer fails the attempt (one that holds none is skipped), then as for a cut.",
		primary: behave(fakeupstream.MalformedAt(faultAt).WithTokens(answerTokens)),
	},
	{
		pattern: "token chunk cut at two thirds mid-stream",
		note:    "One content chunk's JSON ends two thirds in and the stream goes on: it is never skipped as empty (its word would be missing), the attempt fails, then as for a cut; a non-streaming client gets the fallback's whole answer.",
		primary: behave(fakeupstream.TruncatedChunkAt(faultAt).WithTokens(answerTokens)),
		calls:   []bool{true, false},
	},
	{
		pattern: "no [DONE]",
		note:    "A complete answer (finish_reason, usage) whose [DONE] never comes is complete: answered at once, ending with [DONE].",
		primary: behave(fakeupstream.OK().WithTokens(answerTokens).WithoutDone()),
	},
	{
		pattern: "context length, larger-model fallback",
		note:    "Too long for the primary's model: the fallback's model answers, the primary's breaker is not charged (GET /v1/providers).",
		primary: behave(fakeupstream.ContextLength()),
		drive: func(r *scenarioRun) {
			r.send(true)
			r.breaker = r.breakerOf(r.names[0])
		},
		check: func(r *scenarioRun) (outcome, string) {
			if r.breaker != "closed/0" {
				return wrong, "the primary's breaker is " + r.breaker + ", want closed/0"
			}
			return rescued, ""
		},
	},
	{
		pattern: "context length, one model only",
		note:    "Expected: clean error. No source of another model: a 400 with the provider's code after one attempt.",
		primary: behave(fakeupstream.ContextLength()),
		overrides: func(p *profile) [2]map[string]string {
			return [2]map[string]string{nil, {"MODEL": p.primary.fields["MODEL"]}}
		},
		check: func(r *scenarioRun) (outcome, string) {
			c := r.calls[0]
			if c.status != http.StatusBadRequest || c.errCode != "context_length_exceeded" || r.upstream[0].Requests()+r.upstream[1].Requests() != 1 {
				return wrong, fmt.Sprintf("want one attempt and a 400 context_length_exceeded, got HTTP %d %#q after %d", c.status, c.errCode, len(c.truth))
			}
			return cleanError, ""
		},
	},
	{
		pattern: "content filter",
		note:    "Expected: clean error. The request is refused for its content: a 400 with the provider's code, never retried.",
		primary: behave(fakeupstream.ContentFilter()),
		check: func(r *scenarioRun) (outcome, string) {
			c := r.calls[0]
			if c.status != http.StatusBadRequest || r.upstream[0].Requests() != 1 || r.upstream[1].Requests() != 0 {
				return wrong, fmt.Sprintf("want a 400 after one attempt, got HTTP %d after %v", c.status, c.truth)
			}
			return cleanError, ""
		},
	},
	{
		pattern:  "cut, the fallback refuses the prefill",
		note:     "Expected: clean error (under first_token). Nothing can continue the relayed words: an error event naming the cut, not the refusal.",
		primary:  behave(fakeupstream.CutAfter(faultAt).WithTokens(answerTokens)),
		fallback: func(*scenarioRun) []fakeupstream.Option { return continuer(true) },
		check: func(r *scenarioRun) (outcome, string) {
			if c := r.calls[0]; c.errCode == "prefill_unsupported" {
				return cleanError, "the error event is the refusal, not the cut"
			}
			return rescued, ""
		},
	},
	{
		pattern:  "cut, the fallback answers anew instead of continuing",
		note:     "Expected: clean error (under first_token). The fallback takes the prefill but starts the answer again: the relayed words are never sent twice; an error event naming the cut.",
		primary:  behave(fakeupstream.CutAfter(faultAt).WithTokens(answerTokens)),
		fallback: func(*scenarioRun) []fakeupstream.Option { return anewContinuer() },
	},
	{
		pattern: "flapping primary (503 for 4 s, then healthy)",
		note:    "A call every 250 ms for 16 s: all answered; the primary is probed at most once a second while down and has every call back within 10 s of its recovery.",
		primary: func(r *scenarioRun) []fakeupstream.Option {
			return []fakeupstream.Option{fakeupstream.WithFunc(func(ri fakeupstream.RequestInfo) fakeupstream.Behavior {
				if t0 := r.t0.Load(); t0 == nil || ri.Arrival.Sub(*t0) < flapOutage {
					return fakeupstream.ServerError(503)
				}
				return ok
			})}
		},
		drive: func(r *scenarioRun) {
			t0 := time.Now()
			r.t0.Store(&t0)
			for i := 0; time.Since(t0) < flapRun; i++ {
				r.send(i%2 == 0)
				time.Sleep(flapEvery)
			}
		},
		check: checkFlap,
	},
	{
		pattern: "failover accounting",
		note:    "A 500, then a 429 with Retry-After: 30 on the primary, then the fallback; then a non-streaming call: the headers, the gateway object and the access log name every attempt in order.",
		primary: behave(fakeupstream.ServerError(500), fakeupstream.RateLimited("30"), ok),
		calls:   []bool{true, false},
		check: func(r *scenarioRun) (outcome, string) {
			if len(r.calls[0].truth) < 3 {
				return wrong, fmt.Sprintf("the first call made %d attempts, want 3 to account for", len(r.calls[0].truth))
			}
			return rescued, ""
		},
	},
}

// checkFlap holds the flapping primary to the recovery promise.
func checkFlap(r *scenarioRun) (outcome, string) {
	r.remark = "" // its own account replaces the calls' attempt patterns
	t0 := *r.t0.Load()
	recovered := t0.Add(flapOutage)
	during := 0
	for _, at := range r.upstream[0].Arrivals() {
		if at.Before(recovered) {
			during++
		}
	}
	var back time.Duration = -1
	late := 0
	for _, c := range r.calls {
		onPrimary := c.gwSource == r.names[0]
		if back < 0 && c.start.After(recovered) && onPrimary {
			back = c.start.Sub(recovered)
		}
		if c.start.After(recovered.Add(flapBack)) && !onPrimary {
			late++
		}
	}
	remark := fmt.Sprintf("%d calls; %d primary requests during the outage; back on the primary %.1f s after recovery", len(r.calls), during, back.Seconds())
	switch {
	case during > int(flapOutage/time.Second):
		return wrong, remark + ": more than one request a second while down"
	case back < 0 || late > 0:
		return wrong, remark + fmt.Sprintf(": %d calls after %v not on the primary", late, flapBack)
	}
	return rescued, remark
}

// scenarioRun is one scenario in one run (defaults or profile).
type scenarioRun struct {
	sc       *scenario
	scope    string // F01, …
	model    string // its route
	upstream [2]*fakeupstream.Server
	names    [2]string // the sources' names in the gateway's answers
	t0       atomic.Pointer[time.Time]

	send    func(stream bool) // set by the run
	calls   []*call
	base    string // the gateway's URL
	hc      *http.Client
	breaker string // a source's breaker as /v1/providers showed it (state/consecutive failures)

	outcome outcome
	remark  string
}

// truth returns the attempts the upstreams saw between from and to, in
// order of arrival.
func (r *scenarioRun) truth(from, to time.Time) []string {
	type arrival struct {
		at   time.Time
		name string
	}
	var all []arrival
	for i, up := range r.upstream {
		for _, at := range up.Arrivals() {
			if !at.Before(from) && !at.After(to) {
				all = append(all, arrival{at, r.names[i]})
			}
		}
	}
	// Attempts of one call are sequential: arrival order is attempt order.
	slices.SortStableFunc(all, func(a, b arrival) int { return a.at.Compare(b.at) })
	out := make([]string, len(all))
	for i, a := range all {
		out[i] = a.name
	}
	return out
}

// judge classifies the run from its calls and its check.
func (r *scenarioRun) judge() {
	r.outcome, r.remark = rescued, ""
	if len(r.calls) == 0 {
		r.outcome, r.remark = wrong, "no call was sent"
		return
	}
	patterns := map[string]int{}
	var order []string
	for i, c := range r.calls {
		o, why := c.judge(answer)
		if o != rescued && len(c.truth) > 0 {
			why += ", attempts `" + strings.Join(c.truth, ",") + "`"
		}
		if o > r.outcome || i == 0 {
			r.outcome, r.remark = o, why
			if len(r.calls) > 1 && o != rescued {
				r.remark = fmt.Sprintf("call %d of %d: %s", i+1, len(r.calls), why)
			}
		}
		if o == rescued {
			p := strings.Join(c.truth, ",")
			if patterns[p] == 0 {
				order = append(order, p)
			}
			patterns[p]++
		}
	}
	if r.outcome == rescued && len(order) > 0 {
		var parts []string
		for _, p := range order {
			s := "attempts `" + p + "`"
			if len(r.calls) > 1 {
				s += fmt.Sprintf(" ×%d", patterns[p])
			}
			parts = append(parts, s)
		}
		if len(order) > 3 {
			parts = append(parts[:3], "…")
		}
		r.remark = strings.Join(parts, "; ")
	}
	if r.sc.check != nil && r.outcome != wrong {
		o, why := r.sc.check(r)
		if o == wrong || why != "" {
			r.remark = strings.TrimPrefix(r.remark+"; "+why, "; ")
		}
		r.outcome = max(r.outcome, o)
		if o == wrong {
			r.remark = why
		}
	}
}

// slowest is the longest call.
func (r *scenarioRun) slowest() time.Duration {
	var d time.Duration
	for _, c := range r.calls {
		d = max(d, c.latency())
	}
	return d
}

// breakerOf returns the breaker of this scope's source name as GET
// /v1/providers shows it: "state/consecutive failures".
func (r *scenarioRun) breakerOf(name string) string {
	resp, err := r.hc.Get(r.base + "/v1/providers")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var prov struct {
		Data []struct {
			Scope   string `json:"scope"`
			Name    string `json:"name"`
			Breaker struct {
				State               string  `json:"state"`
				ConsecutiveFailures float64 `json:"consecutive_failures"`
			} `json:"breaker"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&prov); err != nil {
		return "unreadable /v1/providers: " + err.Error()
	}
	for _, p := range prov.Data {
		if p.Scope == r.scope && p.Name == name {
			return fmt.Sprintf("%s/%g", p.Breaker.State, p.Breaker.ConsecutiveFailures)
		}
	}
	return "not listed"
}
