-- A circuit is one HASH:
--   open   '1' while open or half-open (half-open once now >= till)
--   till   end of the cooldown (µs)
--   cd     the last open period (µs), doubled by a failed probe
--   epoch  fencing counter: bumped on every open, probe grant and Reset
--   opens  lifetime count of opens
--   cons   consecutive failure weight
--   probe  '1' while the half-open probe is out
--   pexp   end of the probe's lease (µs; -1 = no expiry)
--   wins   probe successes in this half-open period
--   plse   the lease of the probe's holder ('' = unknown)
--   rlse   the lease of the last outcome applied with a lease (by the full
--          path, or a success counted in the window by record.lua), so
--          that a client's retry of the same record is not counted twice
--   off    '1' while the operator has switched the source off (see
--          switch.lua); the circuit then keeps no TTL
--   xt     until when the circuit's TTL runs at least (record.lua)
--   pb     the end of the source's pushback (µs; see pushback.lua): while
--          it lasts, no write gives the circuit a TTL that ends sooner
--   ww     the failure-rate window's bucket width (µs)
--   b0..b9 its ten buckets, each 'index samples failure-weight' ('' = empty),
--          one field each so that recording a success rewrites one bucket

local BUCKETS = 10

-- flt formats a float so that tonumber gives back the same double.
local function flt(n)
  return string.format('%.17g', n)
end

-- bucket_parse reads one bucket field ('' or missing = empty).
local function bucket_parse(v)
  if not v or v == '' then
    return { idx = 0, s = 0, f = 0 }
  end
  local i, n, f = string.match(v, '^(%S+) (%S+) (%S+)$')
  return { idx = tonumber(i) or 0, s = tonumber(n) or 0, f = tonumber(f) or 0 }
end

local function bucket_encode(b)
  if b.s <= 0 then
    return ''
  end
  return int(b.idx) .. ' ' .. int(b.s) .. ' ' .. flt(b.f)
end

-- breaker returns the circuit's full state machine, made on the first call
-- of a script run (see common.lua): record.lua needs it only for what is
-- not a success on a closed circuit.
local BRK
local function breaker()
  if BRK then
    return BRK
  end
  local EPS = 1e-9 -- absorbs rounding of fractional weights

  local function win_clear(w)
    for k = 0, BUCKETS - 1 do
      w.b[k] = { idx = 0, s = 0, f = 0 }
    end
  end

  local function win_parse(h)
    local w = { width = num(h.ww, 0), b = {} }
    for k = 0, BUCKETS - 1 do
      w.b[k] = bucket_parse(h['b' .. k])
    end
    return w
  end

  -- win_add counts one sample weighing failure of a failure at now.
  local function win_add(w, now, failure, window)
    local width = math.max(math.floor(window / BUCKETS), 1)
    if width ~= w.width then
      win_clear(w)
      w.width = width
    end
    local idx = math.floor(now / width)
    local b = w.b[idx % BUCKETS]
    if b.idx ~= idx or b.s == 0 then
      b.idx, b.s, b.f = idx, 0, 0
    end
    b.s = b.s + 1
    b.f = b.f + failure
  end

  -- win_sum returns the samples and failure weight in the window as of now.
  local function win_sum(w, now)
    if w.width == 0 then
      return 0, 0
    end
    local cur = math.floor(now / w.width)
    local s, f = 0, 0
    for k = 0, BUCKETS - 1 do
      local b = w.b[k]
      if b.s > 0 and b.idx <= cur and b.idx > cur - BUCKETS then
        s = s + b.s
        f = f + b.f
      end
    end
    return s, f
  end

  local function load(key)
    local raw = redis.call('HGETALL', key)
    local h = {}
    for i = 1, #raw, 2 do
      h[raw[i]] = raw[i + 1]
    end
    return {
      open = h.open == '1',
      till = num(h.till, 0),
      cd = num(h.cd, 0),
      epoch = num(h.epoch, 0),
      opens = num(h.opens, 0),
      cons = num(h.cons, 0),
      probe = h.probe == '1',
      pexp = num(h.pexp, 0),
      wins = num(h.wins, 0),
      rlse = h.rlse,
      off = h.off == '1',
      pb = h.pb,
      win = win_parse(h),
    }
  end

  local function bool(b)
    if b then
      return '1'
    end
    return '0'
  end

  local function save(key, c, now)
    local w = c.win
    redis.call('HSET', key,
      'open', bool(c.open), 'till', int(c.till), 'cd', int(c.cd),
      'epoch', int(c.epoch), 'opens', int(c.opens), 'cons', flt(c.cons),
      'probe', bool(c.probe), 'pexp', int(c.pexp), 'wins', int(c.wins),
      'ww', int(w.width), 'rlse', c.rlse or '',
      'b0', bucket_encode(w.b[0]), 'b1', bucket_encode(w.b[1]), 'b2', bucket_encode(w.b[2]),
      'b3', bucket_encode(w.b[3]), 'b4', bucket_encode(w.b[4]), 'b5', bucket_encode(w.b[5]),
      'b6', bucket_encode(w.b[6]), 'b7', bucket_encode(w.b[7]), 'b8', bucket_encode(w.b[8]),
      'b9', bucket_encode(w.b[9]))
    local ttl = circuit_ms(c.pb, now)
    if c.open and c.till > now then
      ttl = ttl + math.ceil((c.till - now) / 1000)
    end
    if not c.off then
      redis.call('PEXPIRE', key, int(ttl))
    end
  end

  local function rate_on(cfg)
    return cfg.window > 0 and cfg.fail_rate > 0
  end

  -- trip opens the circuit for cooldown.
  local function trip(c, now, cooldown)
    cooldown = math.max(cooldown, 0)
    c.open = true
    c.till = now + cooldown
    c.cd = cooldown
    c.epoch = c.epoch + 1
    c.opens = c.opens + 1
    c.cons = 0
    win_clear(c.win)
    c.probe = false
    c.wins = 0
  end

  -- close closes the circuit and clears its history; the epoch stays.
  local function close(c)
    c.open = false
    c.till = 0
    c.cd = 0
    c.cons = 0
    win_clear(c.win)
    c.probe = false
    c.pexp = 0
    c.wins = 0
  end

  -- fail counts a failure of weight w and opens the circuit if a channel says so.
  local function fail(c, now, w, cfg)
    c.cons = c.cons + w
    local on = rate_on(cfg)
    local min_calls = math.max(cfg.min_calls, 1)
    local samples, rate = 0, 0
    if on then
      win_add(c.win, now, w, cfg.window)
      local s, f = win_sum(c.win, now)
      samples = s
      if s > 0 then
        rate = f / s
      end
      if s >= min_calls and rate >= cfg.fail_rate - EPS then
        trip(c, now, cfg.cooldown)
        return
      end
    end
    if cfg.threshold > 0 and c.cons >= cfg.threshold - EPS then
      local suppressed = on and samples >= min_calls and rate < cfg.fail_rate / 2 - EPS
      if not suppressed then
        trip(c, now, cfg.cooldown)
      end
    end
  end

  -- record applies the outcome of an admission (request r, see
  -- record.lua) to the circuit at key, unless the admission is fenced.
  local function record(key, r, now)
    local c = load(key)
    if r.lease and c.rlse == r.lease then
      return 1 -- applied already: a retry of the same record
    end
    if c.epoch ~= r.epoch or c.open ~= (r.probe == true) then
      return 0
    end
    c.rlse = r.lease
    local out = r.outcome
    local cfg = r.config
    if c.open then
      -- The probe holder's verdict.
      if out == 0 then
        c.wins = c.wins + 1
        if c.wins >= math.max(cfg.half_open_successes, 1) then
          close(c)
        else
          c.probe = false
        end
      elseif out == 1 or out == 2 or out == 4 then
        local nxt = math.max(2 * c.cd, cfg.cooldown)
        local limit = math.max(cfg.max_cooldown, cfg.cooldown)
        if nxt > limit or c.cd > limit / 2 then
          nxt = limit
        end
        trip(c, now, nxt)
      else
        c.probe = false -- rate limited or abandoned: no verdict
      end
    elseif out == 0 then
      if c.cons == 0 and not rate_on(cfg) then
        return 1
      end
      c.cons = 0
      if rate_on(cfg) then
        win_add(c.win, now, 0, cfg.window)
      end
    elseif out == 1 then
      fail(c, now, 1, cfg)
    elseif out == 2 then
      fail(c, now, math.max(cfg.timeout_weight, 0), cfg)
    elseif out == 4 then
      trip(c, now, cfg.cooldown)
    else
      return 1 -- rate limited or abandoned: nothing changes
    end
    save(key, c, now)
    return 1
  end

  BRK = { record = record }
  return BRK
end
