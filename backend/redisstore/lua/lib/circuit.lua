-- circuit_state reads a circuit that is not closed (its open field is
-- '1') from its till, probe and pexp fields as of now: the state (1 open,
-- 2 half-open), the time until a probe may be admitted, and whether the
-- half-open probe is out.
local function circuit_state(till, probe, pexp, now)
  till = num(till, 0)
  if now < till then
    return 1, till - now, false
  end
  pexp = num(pexp, 0)
  if probe == '1' and (pexp < 0 or now < pexp) then
    local left = 0
    if pexp >= 0 then
      left = pexp - now
    end
    return 2, left, true
  end
  return 2, 0, false
end
