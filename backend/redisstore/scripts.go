package redisstore

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// script assembles a script from the shared prelude, a library and a body.
// Each becomes one redis.Script: Run sends EVALSHA and falls back to EVAL
// when the server does not know the script yet (NOSCRIPT), so a call is one
// round trip once the server has seen the script.
func script(parts ...string) *redis.Script {
	src := mustRead("common.lua")
	for _, p := range parts {
		src += "\n" + mustRead(p)
	}
	return redis.NewScript(src)
}

func mustRead(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic("polygateway: redisstore: missing script " + name)
	}
	return string(b)
}

// The scripts. Every Limiter and Breaker method is exactly one of them.
var (
	acquireScript  = script("limiter.lua", "acquire.lua")
	releaseScript  = script("limiter.lua", "release.lua")
	usageScript    = script("limiter.lua", "usage.lua")
	allowScript    = script("breaker.lua", "allow.lua")
	recordScript   = script("breaker.lua", "record.lua")
	snapshotScript = script("breaker.lua", "snapshot.lua")
	resetScript    = script("breaker.lua", "reset.lua")
	// admitScript and finishScript serve a Limiter and Breaker on one
	// client: one script before the upstream call, one after.
	admitScript  = script("breaker.lua", "limiter.lua", "admit.lua")
	finishScript = script("breaker.lua", "limiter.lua", "finish.lua")
)
