-- Repair: run after the server granted a token that was not greater than
-- one the store had already seen (the counter went backwards). It raises
-- the counter to at least the given floor, so that later tenures get
-- greater tokens again, and gives back the refused tenure if it is still
-- held with the given holder and token.
--
-- KEYS[1] the lease record, KEYS[2] the held key, KEYS[3] the token counter
-- ARGV[1] holder label, ARGV[2] holder instance, ARGV[3] refused token,
-- ARGV[4] floor for the counter, ARGV[5] notification channel,
-- ARGV[6] lease name
--
-- Returns the counter's value after the call.
local record, held, counter = KEYS[1], KEYS[2], KEYS[3]
local value = tonumber(redis.call('GET', counter)) or 0
local floor = tonumber(ARGV[4])
if value < floor then
  redis.call('SET', counter, ARGV[4])
  value = floor
end
if redis.call('PTTL', held) >= 0 then
  local cur = redis.call('HMGET', record, 'label', 'instance', 'token')
  if cur[1] == ARGV[1] and cur[2] == ARGV[2] and tonumber(cur[3]) == tonumber(ARGV[3]) then
    redis.call('DEL', held)
    redis.call('HSET', record, 'released', '1')
    redis.call('PUBLISH', ARGV[5], ARGV[6])
  end
end
return value
