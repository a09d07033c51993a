-- Fence: accept a token for a resource only when it is equal to or greater
-- than every token the resource accepted before, and make the write it
-- carries in the same atomic step.
--
-- KEYS[1] the resource's fence (a string: the greatest token accepted)
-- KEYS[2] the key to write (op set and hset only)
-- ARGV[1] op: 'read', 'check', 'set' or 'hset'
-- ARGV[2] the token offered, in decimal
-- set:  ARGV[3] the value, ARGV[4] its TTL in ms ('0': none)
-- hset: ARGV[3], ARGV[4], ... field, value pairs
--
-- Returns {accepted (0|1), the token recorded before the call}. A refused
-- token changes nothing. The write comes before the fence moves, so a write
-- that fails (WRONGTYPE) leaves the fence as it was.

-- less compares two tokens given as decimal strings without sign or
-- leading zeros: exact for every int64, unlike Lua's doubles.
local function less(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

local recorded = redis.call('GET', KEYS[1]) or '0'
local op, token = ARGV[1], ARGV[2]
if op == 'read' then
  return {1, recorded}
end
if less(token, recorded) then
  return {0, recorded}
end
if op == 'set' then
  if ARGV[4] == '0' then
    redis.call('SET', KEYS[2], ARGV[3])
  else
    redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  end
elseif op == 'hset' then
  redis.call('HSET', KEYS[2], unpack(ARGV, 3))
elseif op ~= 'check' then
  return redis.error_reply('ERR tenure fence: unknown operation ' .. op)
end
if less(recorded, token) then
  redis.call('SET', KEYS[1], token)
end
return {1, recorded}
