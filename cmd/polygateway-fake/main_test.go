package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startFake builds the command, starts it as a process with args on a
// system-chosen loopback port and returns its base URL (ending in /v1) and
// the process; it is stopped when the test ends.
func startFake(t *testing.T, args ...string) (string, *exec.Cmd) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	bin := filepath.Join(t.TempDir(), "polygateway-fake")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		url, ok := strings.CutPrefix(strings.TrimSpace(l), "polygateway-fake listening on ")
		if !ok || !strings.HasSuffix(url, "/v1") {
			t.Fatalf("first line %q", l)
		}
		return url, cmd
	case <-time.After(60 * time.Second):
		t.Fatal("the fake did not say where it listens")
	}
	return "", nil
}

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestFakeRunsAsAProcessWithItsBehaviours(t *testing.T) {
	base, cmd := startFake(t, "-content", "hello from the fake", "-fail", "429", "-retry-after", "7", "-fail-every", "2", "-embedding-dim", "4", "-models", "a,b")
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	resp, body := post(t, base+"/chat/completions", chat)
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || len(out.Choices) != 1 || out.Choices[0].Message.Content != "hello from the fake" {
		t.Fatalf("first chat: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, base+"/chat/completions", chat)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("second chat (every 2nd fails with 429): %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	resp, body = post(t, base+"/chat/completions", strings.Replace(chat, `"model":"m"`, `"model":"m","stream":true`, 1))
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, "fake") {
		t.Fatalf("streamed chat: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(t, base+"/embeddings", `{"model":"e","input":["x"]}`); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fourth request (embeddings count too): %d, want 429", resp.StatusCode)
	}
	resp, body = post(t, base+"/embeddings", `{"model":"e","input":["x","y"]}`)
	var emb struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &emb) != nil || len(emb.Data) != 2 || len(emb.Data[0].Embedding) != 4 {
		t.Fatalf("embeddings: %d %s", resp.StatusCode, body)
	}
	r, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), `"a"`) || !strings.Contains(string(b), `"b"`) {
		t.Errorf("models: %s", b)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

func TestFakeStreamFaults(t *testing.T) {
	base, _ := startFake(t, "-fail", "cut", "-fault-at", "2", "-tokens", "6")
	resp, body := post(t, base+"/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "[DONE]") || strings.Count(body, "data: ") != 2 {
		t.Errorf("a stream cut after 2 chunks: %d %q", resp.StatusCode, body)
	}
}

func TestFakeRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-fail", "418"}, {"-fail", "sometimes"}, {"-fail-every", "0"}, {"-nope"}} {
		var errb strings.Builder
		if code := run(context.Background(), args, io.Discard, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}
