-- Read: report leases as they are now, by the server's clock, for Get and
-- List. Read-only.
--
-- KEYS: for each lease, its record then its held key (2 per lease)
--
-- Returns, in order, one
-- {found (0|1), label, instance, token, seq, acquired_s, acquired_us,
--  state, remaining ms, payload}
-- per lease, state being 1 held, 2 expired or 3 released (tenure.State);
-- remaining is 0 when the lease is not held; payload is the last tenure's.
local results = {}
for i = 1, #KEYS / 2 do
  local record, held = KEYS[2 * i - 1], KEYS[2 * i]
  local cur = redis.call('HMGET', record,
    'label', 'instance', 'token', 'seq', 'acquired_s', 'acquired_us', 'released', 'payload')
  if not cur[3] then
    results[i] = {0, '', '', 0, 0, 0, 0, 0, 0, ''}
  else
    local state, pttl = 1, redis.call('PTTL', held)
    if cur[7] == '1' then
      state, pttl = 3, 0
    elseif pttl < 0 then
      state, pttl = 2, 0
    end
    results[i] = {1, cur[1] or '', cur[2] or '', tonumber(cur[3]) or 0, tonumber(cur[4]) or 0,
      tonumber(cur[5]) or 0, tonumber(cur[6]) or 0, state, pttl, cur[8] or ''}
  end
end
return results
