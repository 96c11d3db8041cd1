package config

import "github.com/polygateway/polygateway/internal/core"

// Settings shortens the test code.
type Settings = core.GatewaySettings
