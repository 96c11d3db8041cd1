package redisstore

// The queue's scripts (lua/queue_*.lua with lua/lib/queue.lua): Admit and
// Release through the queue, and the two a waiting process runs besides.
var (
	queueAdmitScript  = script("queue_admit.lua", "limiter.lua", "gates.lua", "budget.lua", "acquire.lua", "queue.lua")
	queueFinishScript = script("queue_finish.lua", "limiter.lua", "budget.lua", "release.lua", "queue.lua")
	queueLeaveScript  = script("queue_leave.lua", "queue.lua")
	queueCheckScript  = script("queue_check.lua", "queue.lua")
)
