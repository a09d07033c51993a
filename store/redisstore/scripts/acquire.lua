-- Acquire: start a new tenure when the lease is absent, released or expired
-- by the server's clock, else report who holds it. Atomic: one script.
--
-- KEYS[1] the lease record (hash, never expires)
-- KEYS[2] the held key (string, the tenure's token, PX TTL = the expiry)
-- KEYS[3] the token counter (string, INCR, never deleted)
-- ARGV[1] holder label, ARGV[2] holder instance, ARGV[3] TTL in ms,
-- ARGV[4] notification channel, ARGV[5] lease name
--
-- Returns {acquired (0|1), label, instance, token, seq, remaining ms}:
-- the new tenure, or the current one when it is held.
local record, held, counter = KEYS[1], KEYS[2], KEYS[3]
local cur = redis.call('HMGET', record, 'label', 'instance', 'token', 'seq', 'released')
local pttl = redis.call('PTTL', held)
if pttl >= 0 then
  return {0, cur[1] or '', cur[2] or '', tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, pttl}
end

-- The counter hands out the token. The last tenure's token is a floor, so
-- that a counter lost on its own (deleted, evicted) still never repeats a
-- token this lease carried.
local token = redis.call('INCR', counter)
local last = tonumber(cur[3]) or 0
if token <= last then
  token = last + 1
  redis.call('SET', counter, string.format('%d', token))
end

local now = redis.call('TIME')
redis.call('HSET', record,
  'label', ARGV[1], 'instance', ARGV[2],
  'token', string.format('%d', token), 'seq', '1',
  'acquired_s', now[1], 'acquired_us', now[2], 'released', '0')
redis.call('SET', held, string.format('%d', token), 'PX', ARGV[3])

-- A takeover of a tenure that expired (not one that was released, which
-- was announced then) is announced to followers.
if cur[3] and cur[5] ~= '1' then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return {1, ARGV[1], ARGV[2], token, 1, tonumber(ARGV[3])}
