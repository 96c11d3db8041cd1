package pgsink

import (
	"context"
	"errors"
	"time"

	"github.com/polygateway/polygateway/internal/registry"
)

// initialConnectTimeout bounds the first connection attempt of a sink built
// from the configuration.
const initialConnectTimeout = 5 * time.Second

func init() {
	registry.Register(registry.KindTelemetry, "postgres", func(a *registry.Assembly) (any, error) {
		if a.Settings.TelemetryPGDSN == "" {
			return nil, errors.New("PGW_TELEMETRY_PG_DSN is empty")
		}
		// The first connection attempt delays assembly at most this long;
		// an unreachable server is then retried in the background.
		ctx, cancel := context.WithTimeout(context.Background(), initialConnectTimeout)
		defer cancel()
		s, err := Open(ctx, a.Settings.TelemetryPGDSN, WithLogger(a.Logger))
		if err != nil {
			return nil, err
		}
		return s, nil
	})
}
