-- Release: expire each lease of the batch now when it is held by the
-- server's clock with exactly the given holder and token, and announce it.
-- The record and the token counter stay, so the next tenure gets a greater
-- token. Atomic: one script, one round trip for the whole batch.
--
-- KEYS: for each lease, its record then its held key (2 per lease)
-- ARGV[1] notification channel; then for each lease, holder label, holder
--         instance, token and lease name (4 per lease)
--
-- Returns one element per lease, in the order of the batch: 1 when
-- released, 0 when the lease was not held that way.
local results = {}
for i = 1, #KEYS / 2 do
  local record, held = KEYS[2 * i - 1], KEYS[2 * i]
  local a = 1 + (i - 1) * 4
  results[i] = 0
  if redis.call('PTTL', held) >= 0 then
    local cur = redis.call('HMGET', record, 'label', 'instance', 'token')
    if cur[1] == ARGV[a + 1] and cur[2] == ARGV[a + 2] and tonumber(cur[3]) == tonumber(ARGV[a + 3]) then
      redis.call('DEL', held)
      redis.call('HSET', record, 'released', '1')
      redis.call('PUBLISH', ARGV[1], ARGV[a + 4])
      results[i] = 1
    end
  end
end
return results
