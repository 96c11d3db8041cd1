-- Leave the queue: the caller's call ended while it waited (cancelled,
-- out of time). A claim it held goes to the next waiter with its reserved
-- slots (their keys are among the labels'), or they free.
-- KEYS: the queue's, then the slots of the labels.
-- ARGV[1]: { queue = the queue request with id = the entry }.
-- Returns { the id its claim went to (0: none), the claim's end µs, '' },
-- or, when it holds a claim of a label whose slots are not among the
-- keys (its process had not heard of the claim and named another), it
-- stays and the reply is { 0, 0, the claim's label }: run it again with
-- that label's keys, so that the reserved slot goes on with the claim
-- instead of lapsing unused at the claim's end.
local a = cjson.decode(ARGV[1]).queue
local q = qopen(a, now_us(a.now))
qlapse(q)
local e = qmine(q, a.id)
local to, till = 0, 0
if e and e.st == 'c' and e.rl and #e.rl > 0 and not q.labels[e.lb] then
  qchanged(q)
  qsave(q)
  return { 0, 0, e.lb }
end
if e then
  if e.st == 'c' then
    to = qpass(q, a.id, e) or 0
    if to > 0 then
      till = q.now + q.ttl
    end
    qforget(q, a.id, e)
  else
    qleave(q, a.id, e)
  end
end
qchanged(q)
qsave(q)
return { to, till, '' }
