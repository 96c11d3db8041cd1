-- Record. KEYS: the circuit.
-- ARGV: now ('' = TIME), admission epoch, admission probe (1/0), outcome
--       (0 success, 1 failure, 2 timeout, 3 rate limited, 4 dead,
--       5 abandoned), then the configuration (see config).
-- Returns 1 when applied, 0 when fenced.
local key = KEYS[1]

-- Fast path: a success on a closed circuit resets the consecutive count and
-- adds one sample to one bucket; nothing else changes.
if ARGV[4] == '0' and ARGV[3] == '0' then
  local h = redis.call('HMGET', key, 'open', 'epoch', 'cons', 'ww')
  if num(h[2], 0) ~= tonumber(ARGV[2]) or h[1] == '1' then
    return 0
  end
  local cfg = config(5)
  if not rate_on(cfg) then
    if num(h[3], 0) ~= 0 then
      redis.call('HSET', key, 'cons', '0')
      redis.call('PEXPIRE', key, int(IDLE_MS))
    end
    return 1
  end
  local now = now_us(ARGV[1])
  local width = math.max(math.floor(cfg.window / BUCKETS), 1)
  if num(h[4], 0) == width then
    local idx = math.floor(now / width)
    local field = 'b' .. (idx % BUCKETS)
    local b = bucket_parse(redis.call('HGET', key, field))
    if b.idx ~= idx or b.s == 0 then
      b.idx, b.s, b.f = idx, 0, 0
    end
    b.s = b.s + 1
    redis.call('HSET', key, field, bucket_encode(b), 'cons', '0')
    redis.call('PEXPIRE', key, int(IDLE_MS))
    return 1
  end
  -- A new window width: the full path below clears the window.
end

local c = load(key)
if c.epoch ~= tonumber(ARGV[2]) or c.open ~= (ARGV[3] == '1') then
  return 0
end
local o = tonumber(ARGV[4])
local cfg = config(5)
local now = now_us(ARGV[1])
if c.open then
  -- The probe holder's verdict.
  if o == 0 then
    c.wins = c.wins + 1
    if c.wins >= math.max(cfg.half_open_successes, 1) then
      close(c)
    else
      c.probe = false
    end
  elseif o == 1 or o == 2 or o == 4 then
    local nxt = math.max(2 * c.cd, cfg.cooldown)
    local limit = math.max(cfg.max_cooldown, cfg.cooldown)
    if nxt > limit or c.cd > limit / 2 then
      nxt = limit
    end
    trip(c, now, nxt)
  else
    c.probe = false -- rate limited or abandoned: no verdict
  end
elseif o == 0 then
  if c.cons == 0 and not rate_on(cfg) then
    return 1
  end
  c.cons = 0
  if rate_on(cfg) then
    win_add(c.win, now, 0, cfg.window)
  end
elseif o == 1 then
  fail(c, now, 1, cfg)
elseif o == 2 then
  fail(c, now, math.max(cfg.timeout_weight, 0), cfg)
elseif o == 4 then
  trip(c, now, cfg.cooldown)
else
  return 1 -- rate limited or abandoned: nothing changes
end
save(key, c, now)
return 1
