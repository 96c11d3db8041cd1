package main

import (
	"github.com/polygateway/polygateway"
	_ "github.com/polygateway/polygateway/telemetry/sqlitesink"
)

// fromConfig uses the sink named by the configuration
// (PGW_TELEMETRY_BACKEND=sqlite): the client builds it, owns it and closes
// it.
func fromConfig(use func(*polygateway.GatewayClient) error) error {
	client, err := polygateway.FromEnv("LLM") // PGW_TELEMETRY_BACKEND=sqlite, PGW_TELEMETRY_SQLITE_PATH=…
	if err != nil {
		return err
	}
	defer client.Close() // flushes the queued rows and closes the database
	return use(client)
}
