// Command telemetrysinks shows the two ways a program gives its client a
// database telemetry sink, as docs/telemetry.md describes them: named by the
// configuration, in which case the client builds and owns it (config.go),
// or built by the program and handed over with polygateway.WithTelemetry
// (sinks.go). It runs offline against a fake provider, in a temporary
// directory; the Postgres variant runs only when given a DSN.
//
//	go run ./examples/telemetrysinks [-pg-dsn postgres://user:pass@localhost:5432/db]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/internal/fakellm"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	pgDSN := flag.String("pg-dsn", "", "a Postgres DSN, to try the Postgres sink as well")
	flag.Parse()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	provider := fakellm.New(nil)
	defer provider.Close()

	// Work in a temporary directory: the snippets write telemetry.db into
	// the current one.
	dir, err := os.MkdirTemp("", "polygateway-sinks-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chdir(dir); err != nil {
		return err
	}

	// The configuration comes from the environment, as in a deployment.
	for k, v := range map[string]string{
		"LLM__OPENAI__1__BASE_URL":  provider.BaseURL(),
		"LLM__OPENAI__1__API_KEY":   "sk-example",
		"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S": "30",
		"PGW_LIMITER_BACKEND":       "memory",
		"PGW_BREAKER_BACKEND":       "memory",
		"PGW_CACHE_BACKEND":         "none",
		"PGW_TELEMETRY_BACKEND":     "sqlite",
		"PGW_TELEMETRY_SQLITE_PATH": "configured.db",
	} {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}

	ask := func(client *polygateway.GatewayClient) error {
		resp, err := client.Chat(ctx, []polygateway.Message{polygateway.User("ping")})
		if err != nil {
			return err
		}
		fmt.Println("answered by", resp.SourceName, "call", resp.CallID)
		return nil
	}
	if err := fromConfig(ask); err != nil {
		return err
	}
	if err := ownSQLiteSink(ctx, logger, ask); err != nil {
		return err
	}
	if *pgDSN != "" {
		if err := ownPostgresSink(ctx, *pgDSN, logger, ask); err != nil {
			return err
		}
	}
	return nil
}
