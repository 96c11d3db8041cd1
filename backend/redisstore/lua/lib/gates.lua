-- The gates of a limiter request, decoded in one place.
--
-- A request names its levels and its gates:
--   levels  array of { key = i, member = '...' }: a level's slots, log and
--           book are KEYS[i], KEYS[i+1] and KEYS[i+2]; member is the
--           permit's member on the level
--   gates   array of { gate = n, kind = '...', level = j, limit = n,
--           window = µs, amount = n }: gate is the core.Gate number named
--           in a refusal, level the index in levels, and kind one of
--             conc  at most limit slots held at once (the level's slots)
--             rate  at most limit grants in the sliding window (its log)
--             sum   at most limit of amount summed over the grants in the
--                   sliding window (its log and book; amount is what this
--                   request reserves, settled on release)
-- A level holds at most one gate of each kind; its rate and sum gates
-- share its log, and so one window. A new kind is one more branch here.
--
-- levels returns one level table per level, as limiter.lua describes
-- them, in the request's order: gates are checked level by level, and
-- within a level concurrency, then rate, then sum.
local function levels(r)
  local lv = {}
  for i, l in ipairs(r.levels) do
    lv[i] = {
      slots = KEYS[l.key], log = KEYS[l.key + 1], tok = KEYS[l.key + 2], member = l.member,
      conc = 0, rpm = 0, tpm = 0, amount = 0, window = 0, logged = false, purged = false,
      card = 0, fresh = false, sum = 0, n = 0, p = 0, x = 0, xs = 0,
    }
  end
  for _, g in ipairs(r.gates) do
    local v = lv[g.level]
    if g.kind == 'conc' then
      v.conc, v.gconc = g.limit, g.gate
    elseif g.kind == 'rate' then
      v.rpm, v.grate, v.window, v.logged = g.limit, g.gate, g.window, true
    elseif g.kind == 'sum' then
      v.tpm, v.gsum, v.window, v.amount, v.logged = g.limit, g.gate, g.window, g.amount, true
    else
      error('unknown gate kind ' .. tostring(g.kind))
    end
  end
  return lv
end
