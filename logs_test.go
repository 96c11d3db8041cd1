package polygateway_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// logCapture is a slog handler that keeps every record with its attributes.
type logCapture struct {
	mu   *sync.Mutex
	recs *[]loggedRecord
}

type loggedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLogCapture() logCapture { return logCapture{mu: &sync.Mutex{}, recs: &[]loggedRecord{}} }

func (c logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c logCapture) WithGroup(string) slog.Handler            { return c }
func (c logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := loggedRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	c.mu.Lock()
	*c.recs = append(*c.recs, rec)
	c.mu.Unlock()
	return nil
}

// find returns the records with message msg.
func (c logCapture) find(msg string) []loggedRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []loggedRecord
	for _, r := range *c.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

func TestALoggedFailoverAndBreakerOpenCarryTheCallID(t *testing.T) {
	t.Parallel()
	primary := fu.NewServer(t, fu.WithBehavior(fu.BadKey())) // dead: opens at once, fails over at once
	fallback := fu.NewServer(t)
	logs := newLogCapture()
	c := baseEnv().source("openai", 1, primary).source("qwen", 1, fallback, "PRIORITY", "1").
		client(t, polygateway.WithLogger(slog.New(logs)))
	first, err := ask(t, c)
	if err != nil {
		t.Fatal(err)
	}
	fo := logs.find("polygateway: attempt failed, trying again")
	if len(fo) != 1 || fo[0].level != slog.LevelInfo || fo[0].attrs["call_id"] != first.CallID ||
		fo[0].attrs["source"] != "openai_1" || fo[0].attrs["scope"] != "LLM" || fo[0].attrs["attempt"] != "1" || fo[0].attrs["class"] == "" {
		t.Fatalf("failover records %+v, want one INFO record of call %s naming openai_1, attempt 1 and the class", fo, first.CallID)
	}
	// The failure that opened the circuit says so, with its call's id.
	open := logs.find("polygateway: breaker open")
	if len(open) != 1 || open[0].level != slog.LevelWarn || open[0].attrs["call_id"] != first.CallID ||
		open[0].attrs["source"] != "openai_1" || open[0].attrs["from"] != "closed" {
		t.Fatalf("breaker records %+v, want one WARN record of call %s for openai_1 (closed to open)", open, first.CallID)
	}
	// A later call skips the open source without logging it again.
	if _, err := ask(t, c); err != nil {
		t.Fatal(err)
	}
	if n := len(logs.find("polygateway: breaker open")); n != 1 {
		t.Errorf("%d breaker-open records after a second call, want the one", n)
	}
	for _, r := range *logs.recs {
		if r.attrs["call_id"] == "" && r.level >= slog.LevelInfo {
			t.Errorf("a record about a call without call_id: %+v", r)
		}
	}
}
