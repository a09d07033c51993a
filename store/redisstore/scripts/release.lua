-- Release: expire the lease now when it is held by the server's clock with
-- exactly the given holder and token. The record and the token counter
-- stay, so the next tenure gets a greater token.
--
-- KEYS[1] the lease record, KEYS[2] the held key
-- ARGV[1] holder label, ARGV[2] holder instance, ARGV[3] token,
-- ARGV[4] notification channel, ARGV[5] lease name
--
-- Returns 1 when released, 0 when the lease was not held that way.
local record, held = KEYS[1], KEYS[2]
if redis.call('PTTL', held) < 0 then
  return 0
end
local cur = redis.call('HMGET', record, 'label', 'instance', 'token')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or tonumber(cur[3]) ~= tonumber(ARGV[3]) then
  return 0
end
redis.call('DEL', held)
redis.call('HSET', record, 'released', '1')
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
