package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/proxy"
)

// addressPattern finds what a client must never see of the topology: an
// IPv4 address, a loopback or dial phrase, a URL.
var addressPattern = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b|\[::1\]|dial tcp|connect: connection refused|https?://`)

// refusedURL is a base URL where nothing listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

// A scope whose only source refuses connections answers 503 naming the
// source and its reason, never the address it dialled; the server log has
// the dial error (and no key).
func TestUnavailableBodyNamesSourcesNotAddresses(t *testing.T) {
	t.Parallel()
	down := refusedURL(t)
	e := baseEnv().source("LLM", "primary", 1, down, secretKey1, "primary-model").set("LLM__RETRY__MAX_ATTEMPTS", "2")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM",
	}})
	for _, stream := range []bool{false, true} {
		resp, body := f.do(http.MethodPost, "/v1/chat/completions", chatBody("any", stream, ""))
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("stream=%v: status %d: %s", stream, resp.StatusCode, body)
		}
		if m := addressPattern.FindString(string(body)); m != "" {
			t.Errorf("stream=%v: the 503 body shows %q: %s", stream, m, body)
		}
		if !strings.Contains(string(body), "primary_1") || !strings.Contains(string(body), "network_error") {
			t.Errorf("stream=%v: the body does not name the source and its reason: %s", stream, body)
		}
	}
	logs := f.logs.String()
	hostPort := strings.TrimSuffix(strings.TrimPrefix(down, "http://"), "/v1")
	if !strings.Contains(logs, "governed call failed") || !strings.Contains(logs, hostPort) {
		t.Errorf("the server log lacks the full error: %s", logs)
	}
	if strings.Contains(logs, secretKey1) {
		t.Errorf("the server log shows the key: %s", logs)
	}
}

// A request body that arrives too slowly gets a 400 that does not name the
// connection's addresses.
func TestSlowBodyErrorHidesAddresses(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(up.Close)
	e := baseEnv().source("LLM", "primary", 1, up.URL+"/v1", secretKey1, "primary-model")
	f := serve(t, proxy.Config{ReadTimeout: 300 * time.Millisecond, Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM",
	}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := chatBody("any", false, "")
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:10])
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "could not read the request body") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if m := addressPattern.FindString(string(b)); m != "" || strings.Contains(string(b), "tcp") {
		t.Errorf("the 400 body shows %q: %s", m, b)
	}
}

// The proxy's Config prints its client keys and admin token masked.
func TestConfigPrintsMasked(t *testing.T) {
	t.Parallel()
	const token = "admin-TOKEN-0123456789"
	cfg := proxy.Config{ClientKeys: []string{secretKey1, secretKey2}, AdminToken: token, MaxInFlight: 7}
	var logs testkit.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("cfg", "config", cfg, "ptr", &cfg)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("cfg", "config", cfg)
	outs := []string{logs.String()}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, cfg), fmt.Sprintf(verb, &cfg))
	}
	for _, out := range outs {
		for _, secret := range []string{secretKey1, secretKey2, token} {
			if strings.Contains(out, secret) {
				t.Errorf("%q shows in %s", secret, out)
			}
		}
	}
	if got := fmt.Sprintf("%+v", cfg); !strings.Contains(got, "MaxInFlight:7") || !strings.Contains(got, "AdminToken:***") {
		t.Errorf("%%+v = %s", got)
	}
	if cfg.AdminToken != token || cfg.ClientKeys[0] != secretKey1 {
		t.Fatal("printing modified the config")
	}
}

// An upstream's error.param reaches the client (a rejection names the
// field at fault), but never an address it carries: the param passes the
// same scrubbing as the message, streamed or not.
func TestAnUpstreamErrorParamNeverShowsAnAddress(t *testing.T) {
	t.Parallel()
	const rejection = `{"error":{"message":"bad value","type":"invalid_request_error","param":"http://10.0.0.7:8000/v1 internal.example:8443","code":"invalid_value"}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, rejection)
	}))
	t.Cleanup(up.Close)
	e := baseEnv().source("LLM", "primary", 1, up.URL+"/v1", secretKey1, "primary-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM",
	}})
	for _, stream := range []bool{false, true} {
		resp, body := f.do(http.MethodPost, "/v1/chat/completions", chatBody("any", stream, ""))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"invalid_value"`) {
			t.Fatalf("stream=%v: status %d: %s", stream, resp.StatusCode, body)
		}
		if m := addressPattern.FindString(string(body)); m != "" || strings.Contains(string(body), "internal.example:8443") {
			t.Errorf("stream=%v: the 400 body shows an upstream address: %s", stream, body)
		}
	}
}
