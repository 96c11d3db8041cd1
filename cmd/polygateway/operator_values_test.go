package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestArgumentsBesidesTheFlagsAreRefused: the command takes flags only; a
// stray argument (a subcommand that does not exist, a file named without
// -config) stops flag parsing, so the flags after it would be ignored
// silently and the gateway would serve instead of checking, say.
func TestArgumentsBesidesTheFlagsAreRefused(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.env")
	for _, args := range [][]string{
		{"-version", "check"},
		{"-env-file", missing, "gateway.yaml", "-check"},
		{"check", "-version"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb, nil); code != 2 {
			t.Errorf("%q: exit %d, want 2; stdout %q stderr %q", args, code, out.String(), errb.String())
		}
		if !strings.Contains(errb.String(), "unexpected argument") || strings.Contains(errb.String(), "check\"") || strings.Contains(errb.String(), "gateway.yaml") {
			t.Errorf("%q: stderr %q, want the refusal without the argument itself", args, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("%q: printed %q on stdout", args, out.String())
		}
	}
}

// TestListenAddressesAreCheckedWithTheServerKeys: PGW_LISTEN_ADDR and
// PGW_ADMIN_ADDR are host:port; a value the listener cannot take is
// refused by the one validation (-check included), naming the key,
// instead of failing at start without a key, and an empty
// PGW_LISTEN_ADDR never means every interface on a random port.
func TestListenAddressesAreCheckedWithTheServerKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, val string
		ok       bool
	}{
		{"PGW_LISTEN_ADDR", "127.0.0.1:8400", true},
		{"PGW_LISTEN_ADDR", ":8400", true},
		{"PGW_LISTEN_ADDR", "[::1]:0", true},
		{"PGW_LISTEN_ADDR", "localhost:8400", true},
		{"PGW_LISTEN_ADDR", " 0.0.0.0:8400 ", true},
		{"PGW_LISTEN_ADDR", "127.0.0.1:http", true},
		{"PGW_LISTEN_ADDR", "", false},
		{"PGW_LISTEN_ADDR", "   ", false},
		{"PGW_LISTEN_ADDR", "8400", false},
		{"PGW_LISTEN_ADDR", "127.0.0.1", false},
		{"PGW_LISTEN_ADDR", "127.0.0.1:99999", false},
		{"PGW_LISTEN_ADDR", "127.0.0.1:-1", false},
		{"PGW_LISTEN_ADDR", "127.0.0.1:no-such-service", false},
		{"PGW_LISTEN_ADDR", "::1:8400", false},
		{"PGW_ADMIN_ADDR", "127.0.0.1:6060", true},
		{"PGW_ADMIN_ADDR", "", true}, // off, as unset
		{"PGW_ADMIN_ADDR", "6060", false},
		{"PGW_ADMIN_ADDR", "127.0.0.1:70000", false},
	} {
		_, err := parseServerConfig(map[string]string{"PGW_ROUTES": "a=B", tc.key: tc.val})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s=%q: %v", tc.key, tc.val, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.key+":")):
			t.Errorf("%s=%q: err %v, want an error naming the key", tc.key, tc.val, err)
		}
	}
}

// TestEmptyTokensAreRefused: the tokens are non-empty strings; an empty
// PGW_METRICS_TOKEN (a secret store that delivered nothing) would leave
// /metrics open to anyone while the operator believes it closed.
func TestEmptyTokensAreRefused(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"PGW_METRICS_TOKEN", "PGW_ADMIN_TOKEN"} {
		for _, v := range []string{"", "  "} {
			_, err := parseServerConfig(map[string]string{"PGW_ROUTES": "a=B", key: v})
			if err == nil || !strings.Contains(err.Error(), key+": empty value") {
				t.Errorf("%s=%q: err %v, want an empty-value error naming the key", key, v, err)
			}
		}
	}
}

// TestAClientBudgetBeyondTheBackendsBoundNamesItsKey: a client budget above
// what the backends hold is refused naming PGW_CLIENT_BUDGET_USD (or its
// config file path), as a scope's BUDGET__USD is.
func TestAClientBudgetBeyondTheBackendsBoundNamesItsKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		usd string
		ok  bool
	}{{"9000000000", true}, {"9000000000.5", false}, {"99999999999", false}} {
		_, err := parseServerConfig(map[string]string{"PGW_ROUTES": "a=B", "PGW_CLIENT_KEYS": "k1", "PGW_CLIENT_BUDGET_USD": tc.usd})
		switch {
		case tc.ok && err != nil:
			t.Errorf("PGW_CLIENT_BUDGET_USD=%s: %v", tc.usd, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "PGW_CLIENT_BUDGET_USD: ") || !strings.Contains(err.Error(), "out of range")):
			t.Errorf("PGW_CLIENT_BUDGET_USD=%s: err %v, want out of range naming the key", tc.usd, err)
		}
	}
}
