package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// outcome is how one call, or one scenario, ended for its client.
type outcome int

// The outcomes, from best to worst: a scenario's is its worst call's.
const (
	// rescued: the client got the complete, correct answer.
	rescued outcome = iota
	// cleanError: an honest error, a status or an SSE error event (never a
	// truncated answer ending with [DONE]), within the client's budget.
	cleanError
	// wrong: a truncated or wrong answer presented as success, a hang past
	// the budget, or attempts misreported.
	wrong
)

func (o outcome) String() string {
	return [...]string{"rescued", "clean error", "wrong"}[o]
}

// call is one request of a scenario and what its client received.
type call struct {
	id     string
	stream bool
	start  time.Time
	end    time.Time

	err         error // no answer: transport failure or budget exceeded
	hang        bool  // the budget passed
	status      int
	hdrAttempts []string
	hdrSource   string
	done        bool   // the stream ended with data: [DONE]
	errEvents   int    // SSE error events
	lastIsError bool   // the last event is an error event
	errCode     string // the code of an error body or event
	text        string // the answer's content
	gwAttempts  []string
	gwSource    string
	gwFound     bool

	// truth is the attempts the upstreams saw during the call, in order.
	truth []string
	// logAttempts is the access log line's account, logFound whether the
	// line was found.
	logAttempts []string
	logFound    bool
}

// latency is how long the client waited.
func (c *call) latency() time.Duration { return c.end.Sub(c.start) }

// gatewayInfo is the part of the gateway object the bench reads.
type gatewayInfo struct {
	Source   string   `json:"source"`
	Attempts []string `json:"attempts"`
}

// do sends one chat completion for model to the gateway at base (its
// /v1 base URL) with the request id id, within budget, and reads the whole
// answer.
func do(hc *http.Client, base, model, id string, stream bool, budget time.Duration) *call {
	c := &call{id: id, stream: stream, start: time.Now()}
	defer func() { c.end = time.Now() }()
	body, _ := json.Marshal(map[string]any{"model": model, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": "Tell me something."}}})
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		c.err = err
		return c
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-ID", id)
	resp, err := hc.Do(req)
	if err != nil {
		c.err, c.hang = err, ctx.Err() != nil
		return c
	}
	defer resp.Body.Close()
	c.status = resp.StatusCode
	c.hdrSource = resp.Header.Get("X-PolyGateway-Source")
	if h := resp.Header.Get("X-PolyGateway-Attempts"); h != "" {
		c.hdrAttempts = strings.Split(h, ",")
	}
	var rerr error
	switch {
	case resp.StatusCode != http.StatusOK:
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		b, err := io.ReadAll(resp.Body)
		if rerr = err; err == nil {
			if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
				rerr = fmt.Errorf("status %d without an error object: %.120s", resp.StatusCode, b)
			}
			c.errCode = e.Error.Code
		}
	case stream:
		rerr = c.readStream(resp.Body)
	default:
		rerr = c.readJSON(resp.Body)
	}
	if rerr != nil {
		c.err, c.hang = rerr, ctx.Err() != nil
	}
	return c
}

// readStream reads an SSE answer.
func (c *call) readStream(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		c.lastIsError = false
		if string(data) == "[DONE]" {
			c.done = true
			continue
		}
		var ev struct {
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Gateway *gatewayInfo `json:"gateway"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("a malformed event from the gateway: %.120s", data)
		}
		if ev.Error != nil {
			c.errEvents++
			c.lastIsError = true
			c.errCode = ev.Error.Code
			continue
		}
		for _, ch := range ev.Choices {
			c.text += ch.Delta.Content
		}
		if ev.Gateway != nil {
			c.gwFound, c.gwAttempts, c.gwSource = true, ev.Gateway.Attempts, ev.Gateway.Source
		}
	}
	return sc.Err()
}

// readJSON reads a non-streaming answer.
func (c *call) readJSON(r io.Reader) error {
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Gateway *gatewayInfo `json:"gateway"`
	}
	if err := json.NewDecoder(r).Decode(&out); err != nil {
		return err
	}
	if len(out.Choices) == 1 {
		c.text = out.Choices[0].Message.Content
	}
	if out.Gateway != nil {
		c.gwFound, c.gwAttempts, c.gwSource = true, out.Gateway.Attempts, out.Gateway.Source
	}
	return nil
}

// judge classifies the call against the complete answer want, and says
// why in a few words.
func (c *call) judge(want string) (outcome, string) {
	o, why := c.classify(want)
	if o != wrong {
		if p := c.accountingProblem(); p != "" {
			return wrong, p
		}
	}
	return o, why
}

func (c *call) classify(want string) (outcome, string) {
	switch {
	case c.hang:
		return wrong, fmt.Sprintf("no end within the client's %.0f s budget", c.latency().Seconds())
	case c.err != nil:
		return wrong, "unreadable answer: " + c.err.Error()
	case c.status != http.StatusOK:
		return cleanError, fmt.Sprintf("HTTP %d %#q", c.status, c.errCode)
	case c.stream && c.done && c.errEvents > 0:
		return wrong, "an error event, then [DONE]"
	case c.stream && c.lastIsError:
		return cleanError, fmt.Sprintf("error event %#q after %d words", c.errCode, len(strings.Fields(c.text)))
	case c.stream && !c.done:
		return wrong, fmt.Sprintf("stream ended after %d words without [DONE] or an error event", len(strings.Fields(c.text)))
	case c.text != want:
		return wrong, fmt.Sprintf("%d words presented as the whole answer, want %d", len(strings.Fields(c.text)), len(strings.Fields(want)))
	}
	return rescued, "answered by " + cmp.Or(c.gwSource, c.hdrSource)
}

// accountingProblem compares what the gateway said about the attempts
// with what the upstreams saw: the access log and the final gateway object
// must name every attempt in order, the headers the attempts made before
// they were sent.
func (c *call) accountingProblem() string {
	truth := strings.Join(c.truth, ",")
	if !c.logFound {
		return "no access log line"
	}
	if got := strings.Join(c.logAttempts, ","); got != truth {
		return fmt.Sprintf("access log attempts %q, the upstreams saw %q", got, truth)
	}
	if c.status == http.StatusOK && (!c.stream || !c.lastIsError) {
		if !c.gwFound {
			return "no gateway object in the answer"
		}
		if got := strings.Join(c.gwAttempts, ","); got != truth {
			return fmt.Sprintf("gateway.attempts %q, the upstreams saw %q", got, truth)
		}
	}
	hdr := strings.Join(c.hdrAttempts, ",")
	if c.stream && c.status == http.StatusOK {
		if len(c.hdrAttempts) > len(c.truth) || hdr != strings.Join(c.truth[:len(c.hdrAttempts)], ",") || hdr == "" {
			return fmt.Sprintf("X-PolyGateway-Attempts %q is not how the upstreams' %q began", hdr, truth)
		}
	} else if hdr != truth {
		return fmt.Sprintf("X-PolyGateway-Attempts %q, the upstreams saw %q", hdr, truth)
	}
	return ""
}
