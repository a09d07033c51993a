-- Strict write: set fields of a hash when, by the server's clock, the
-- lease is held with exactly the writer's holder, token and renewal seq,
-- and advance the seq in the same atomic step, as a renewal does. Of two
-- clones of one holder (same holder, token and seq) only the first to
-- write passes; the other finds the chain moved on.
--
-- KEYS[1] the lease's record (redisstore), KEYS[2] its held key, KEYS[3]
--         the hash to write
-- ARGV    holder label, holder instance, token, seq, then field, value, ...
--
-- Returns {1, new seq} when written, {0, token, seq, held} when refused:
-- the record's token and seq (0 when there is no record) and whether the
-- lease is held (1) or not (0).
local cur = redis.call('HMGET', KEYS[1], 'label', 'instance', 'token', 'seq')
local token, seq = tonumber(cur[3]) or 0, tonumber(cur[4]) or 0
-- PTTL answers -2 when the held key is gone: released or expired.
local held = redis.call('PTTL', KEYS[2]) > 0
if not held or cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2]
    or token ~= tonumber(ARGV[3]) or seq ~= tonumber(ARGV[4]) then
  return {0, token, seq, held and 1 or 0}
end
-- The data first: a write the server refuses (WRONGTYPE) raises an error
-- here and leaves the chain where it was.
redis.call('HSET', KEYS[3], unpack(ARGV, 5))
return {1, redis.call('HINCRBY', KEYS[1], 'seq', 1)}
