-- Renew: extend every lease of the batch that is held by the server's
-- clock with exactly the given holder, token and seq. Atomic: one script,
-- one round trip for the whole batch.
--
-- KEYS: for each lease, its record then its held key (2 per lease)
-- ARGV: for each lease, holder label, holder instance, token, seq and TTL
--       in ms (5 per lease)
--
-- Returns one flat array with, in the order of the batch, for each lease
-- one of:
--   1, seq, remaining ms, server TIME in µs       renewed (seq is the new one)
--   0                                             absent
--   2, token, seq                                 not held (released, expired)
--   3, label, instance, token, seq, remaining ms  held, but not that way
local now = redis.call('TIME')
local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])
local results, n = {}, 0
for i = 1, #KEYS / 2 do
  local record, held = KEYS[2 * i - 1], KEYS[2 * i]
  local a = (i - 1) * 5
  local ttl = ARGV[a + 5]
  local cur = redis.call('HMGET', record, 'label', 'instance', 'token', 'seq')
  local token, seq = tonumber(cur[3]), tonumber(cur[4]) or 0
  if not token then
    results[n + 1] = 0
    n = n + 1
  elseif cur[1] == ARGV[a + 1] and cur[2] == ARGV[a + 2]
      and token == tonumber(ARGV[a + 3]) and seq == tonumber(ARGV[a + 4])
      and redis.call('PEXPIRE', held, ttl) == 1 then
    -- PEXPIRE answers 1 only when the held key exists: the lease is held.
    results[n + 1] = 1
    results[n + 2] = redis.call('HINCRBY', record, 'seq', 1)
    results[n + 3] = tonumber(ttl)
    results[n + 4] = clock
    n = n + 4
  else
    local pttl = redis.call('PTTL', held)
    if pttl < 0 then
      results[n + 1] = 2
      results[n + 2] = token
      results[n + 3] = seq
      n = n + 3
    else
      results[n + 1] = 3
      results[n + 2] = cur[1] or ''
      results[n + 3] = cur[2] or ''
      results[n + 4] = token
      results[n + 5] = seq
      results[n + 6] = pttl
      n = n + 6
    end
  end
end
return results
