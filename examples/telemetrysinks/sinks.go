package main

import (
	"context"
	"log/slog"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/telemetry/pgsink"
	"github.com/polygateway/polygateway/telemetry/sqlitesink"
)

// ownSQLiteSink builds the SQLite sink itself and hands it over with
// WithTelemetry; the program, not the client, closes it.
func ownSQLiteSink(ctx context.Context, logger *slog.Logger, use func(*polygateway.GatewayClient) error) error {
	sink, err := sqlitesink.Open("telemetry.db", sqlitesink.WithLogger(logger))
	if err != nil {
		return err
	}
	defer sink.Close(ctx) // after client.Close: writes what is still queued
	return withSink(sink, use)
}

// ownPostgresSink does the same with the Postgres sink.
func ownPostgresSink(ctx context.Context, dsn string, logger *slog.Logger, use func(*polygateway.GatewayClient) error) error {
	sink, err := pgsink.Open(ctx, dsn, pgsink.WithSchema("observability"), pgsink.WithLogger(logger))
	if err != nil {
		return err
	}
	defer sink.Close(ctx)
	return withSink(sink, use)
}

// withSink makes a client that writes to sink, whatever the configuration
// names, and uses it.
func withSink(sink core.TelemetrySink, use func(*polygateway.GatewayClient) error) error {
	client, err := polygateway.FromEnv("LLM", polygateway.WithTelemetry(sink))
	if err != nil {
		return err
	}
	defer client.Close()
	return use(client)
}
