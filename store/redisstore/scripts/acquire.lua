-- Acquire: start a new tenure when the lease is absent, released or expired
-- by the server's clock, else report who holds it. Atomic: one script.
--
-- KEYS[1] the lease record (hash, never expires)
-- KEYS[2] the held key (string, the tenure's token, PX TTL = the expiry)
-- KEYS[3] the token counter (string, the last token handed out, never deleted)
-- ARGV[1] holder label, ARGV[2] holder instance, ARGV[3] TTL in ms,
-- ARGV[4] notification channel, ARGV[5] lease name, ARGV[6] payload
--
-- Returns {acquired (0|1), label, instance, token, seq, remaining ms,
-- payload, server TIME in microseconds}: the new tenure, or the current one
-- when it is held (then TIME is 0).
local record, held, counter = KEYS[1], KEYS[2], KEYS[3]
local cur = redis.call('HMGET', record, 'label', 'instance', 'token', 'seq', 'released', 'payload')
local pttl = redis.call('PTTL', held)
if pttl >= 0 then
  return {0, cur[1] or '', cur[2] or '', tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, pttl, cur[6] or '', 0}
end

-- The token is max(counter + 1, last + 1, server TIME in microseconds),
-- stored back in the counter. The counter makes tokens grow while the
-- server keeps its data; the last tenure's token is a floor for this name
-- when the counter alone was lost (deleted, evicted); the clock makes
-- tokens grow across a loss of all data (a restart without persistence, a
-- failover to a replica that lacked the last writes): a later grant reads a
-- later TIME. Every value stays below 2^53, so Lua's doubles are exact:
-- TIME in microseconds reaches 2^53 in the year 2255.
local now = redis.call('TIME')
local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])
local token = math.max(tonumber(redis.call('GET', counter)) or 0, tonumber(cur[3]) or 0) + 1
if clock > token then
  token = clock
end
if token >= 9007199254740992 then
  return redis.error_reply('ERR tenure acquire: the token counter ' .. KEYS[3] ..
    ' is at 2^53 or beyond, where Lua cannot count exactly; tokens cannot grow any more')
end
redis.call('SET', counter, string.format('%d', token))

redis.call('HSET', record,
  'label', ARGV[1], 'instance', ARGV[2],
  'token', string.format('%d', token), 'seq', '1',
  'acquired_s', now[1], 'acquired_us', now[2], 'released', '0', 'payload', ARGV[6])
redis.call('SET', held, string.format('%d', token), 'PX', ARGV[3])

-- A takeover of a tenure that expired (not one that was released, which
-- was announced then) is announced to followers.
if cur[3] and cur[5] ~= '1' then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return {1, ARGV[1], ARGV[2], token, 1, tonumber(ARGV[3]), ARGV[6], clock}
