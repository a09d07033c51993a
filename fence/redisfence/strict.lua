-- Strict write: set fields of a hash when, by the server's clock, the
-- lease is held with exactly the writer's holder, token and renewal seq,
-- and advance the seq in the same atomic step, as a renewal does. Of two
-- clones of one holder (same holder, token and seq) only the first to
-- write passes; the other finds the chain moved on.
--
-- KEYS[1] the lease's record (redisstore), KEYS[2] its held key, KEYS[3]
--         the hash to write
-- ARGV    holder label, holder instance, token, seq, the lease store's key
--         prefix, then field, value, ... Token and seq are canonical
--         positive decimals (digits only, no sign, no leading zero, at most
--         2^63 - 1); KEYS[1] and KEYS[2] start with the prefix and KEYS[3]
--         must not (a data key there would forge a lease).
--
-- Returns {1, new seq} when written, {0, token, seq, held} when refused:
-- the record's token and seq (0 when there is no record) and whether the
-- lease is held (1) or not (0). Bad arguments are errors that start with
-- "ERR tenure strict:" and change nothing.
local function canonical(s)
  if type(s) ~= 'string' or #s > 19 or not string.find(s, '^[1-9][0-9]*$') then
    return false
  end
  return #s < 19 or s <= '9223372036854775807'
end
local function starts(s, prefix)
  return prefix ~= '' and string.sub(s, 1, #prefix) == prefix
end
if not canonical(ARGV[3]) or not canonical(ARGV[4]) then
  return redis.error_reply('ERR tenure strict: token and seq must be canonical positive decimals (digits only, no sign, no leading zero, at most 2^63 - 1)')
end
local prefix = ARGV[5] or ''
if not starts(KEYS[1], prefix) or not starts(KEYS[2], prefix) or starts(KEYS[3], prefix) then
  return redis.error_reply('ERR tenure strict: the lease keys must start with the store key prefix (ARGV[5]) and the data key must not')
end
local cur = redis.call('HMGET', KEYS[1], 'label', 'instance', 'token', 'seq')
-- Compared as strings: the record holds canonical decimals, as ARGV must.
local token, seq = cur[3] or '0', cur[4] or '0'
-- PTTL answers -2 when the held key is gone: released or expired.
local held = redis.call('PTTL', KEYS[2]) > 0
if not held or cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2]
    or token ~= ARGV[3] or seq ~= ARGV[4] then
  return {0, tonumber(token) or 0, tonumber(seq) or 0, held and 1 or 0}
end
-- The data first: a write the server refuses (WRONGTYPE) raises an error
-- here and leaves the chain where it was.
redis.call('HSET', KEYS[3], unpack(ARGV, 6))
return {1, redis.call('HINCRBY', KEYS[1], 'seq', 1)}
