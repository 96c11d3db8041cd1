package main

// The opt-in backends register themselves when linked, so that every
// PGW_*_BACKEND value (redis, sqlite, postgres) works from the
// environment alone.
import (
	_ "github.com/polygateway/polygateway/backend/redisstore"
	_ "github.com/polygateway/polygateway/telemetry/pgsink"
	_ "github.com/polygateway/polygateway/telemetry/sqlitesink"
)
