package redisstore

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua lua/lib/*.lua
var luaFiles embed.FS

// script assembles a script from lib/common.lua, the libraries it uses
// (lua/lib, in order) and its body (lua/<body>). Each becomes one
// redis.Script: Run sends EVALSHA and falls back to EVAL when the server
// does not know the script yet (NOSCRIPT), so a call is one round trip once
// the server has seen the script.
func script(body string, libs ...string) *redis.Script {
	src := mustRead("lib/common.lua")
	for _, l := range libs {
		src += "\n" + mustRead("lib/"+l)
	}
	return redis.NewScript(src + "\n" + mustRead(body))
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
	acquireScript  = script("acquire.lua", "limiter.lua", "gates.lua", "budget.lua", "acquire.lua")
	releaseScript  = script("release.lua", "limiter.lua", "budget.lua", "release.lua", "queue.lua")
	usageScript    = script("usage.lua", "limiter.lua")
	budgetsScript  = script("budgets.lua", "budget.lua")
	allowScript    = script("allow.lua", "circuit.lua", "allow.lua")
	recordScript   = script("record.lua", "breaker.lua", "record.lua")
	snapshotScript = script("snapshot.lua", "circuit.lua")
	resetScript    = script("reset.lua")
	switchScript   = script("switch.lua")
	pushbackScript = script("pushback.lua")
	// admitScript and finishScript are the Admitter's: one script before
	// the upstream call, one after, both through the scope's fair queue;
	// reclaimScript gives back what a call whose reply was lost may hold.
	admitScript   = script("admit.lua", "circuit.lua", "allow.lua", "limiter.lua", "gates.lua", "budget.lua", "acquire.lua", "queue.lua")
	finishScript  = script("finish.lua", "breaker.lua", "record.lua", "limiter.lua", "budget.lua", "release.lua", "queue.lua")
	reclaimScript = script("reclaim.lua", "limiter.lua", "budget.lua", "release.lua", "queue.lua")
	// The two scripts of the queue a waiting process runs besides: a
	// waiter leaving, and the check of its waiters and of the claims it
	// granted (lua/queue_*.lua with lua/lib/queue.lua).
	queueLeaveScript = script("queue_leave.lua", "queue.lua")
	queueCheckScript = script("queue_check.lua", "queue.lua")
)
