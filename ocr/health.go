package ocr

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// CheckHealth probes GET /health of every source at the same time and
// reports, by source name, whether it answered 200 with
// {"status":"healthy","model_loaded":true} within the probe timeout:
// Config.HealthTimeout (default 5 s), capped by the source's own
// TIMEOUT_S. A refused connection (a server still loading its model), an
// error status, another body or a slow answer is false. The whole check
// takes about one probe timeout however many sources there are.
//
// Probes go straight to the servers, not through the engine: they use
// no rate-limit permit, do not touch the breakers and write no telemetry.
// They send no credentials (the endpoint is public). When ctx ends, the
// probes still running report false. A nil ctx, or a client after Close,
// reports every source false without a probe.
func (c *Client) CheckHealth(ctx context.Context) map[string]bool {
	sources := c.k.Settings().Sources
	ok := make([]bool, len(sources)) // one slot per goroutine: no lock needed
	var wg sync.WaitGroup
	for i := range sources {
		if ctx == nil || c.k.Closed() {
			break // nothing is probed: every source is false
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = c.probe(ctx, &sources[i])
		}()
	}
	wg.Wait()
	out := make(map[string]bool, len(sources))
	for i, src := range sources {
		out[src.Name] = ok[i]
	}
	return out
}

// probe performs one health request.
func (c *Client) probe(ctx context.Context, src *core.SourceConfig) bool {
	timeout := c.cfg.HealthTimeout
	if src.Timeout > 0 && src.Timeout < timeout {
		timeout = src.Timeout
	}
	u, err := baseURL(src.BaseURL)
	if err != nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, u.Scheme+"://"+u.Host+u.EscapedPath()+"/health", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.up.tc.Send(src, req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return false
	}
	var h struct {
		Status      string `json:"status"`
		ModelLoaded *bool  `json:"model_loaded"`
	}
	if json.Unmarshal(body, &h) != nil {
		return false
	}
	return h.Status == "healthy" && (h.ModelLoaded == nil || *h.ModelLoaded)
}
