package sqlitesink

import (
	"errors"

	"github.com/polygateway/polygateway/internal/registry"
)

func init() {
	registry.Register(registry.KindTelemetry, "sqlite", func(a *registry.Assembly) (any, error) {
		if a.Settings.TelemetrySQLitePath == "" {
			return nil, errors.New("PGW_TELEMETRY_SQLITE_PATH is empty")
		}
		s, err := Open(a.Settings.TelemetrySQLitePath, WithLogger(a.Logger))
		if err != nil {
			return nil, err
		}
		return s, nil
	})
}
