-- Fence: accept a token for a resource only when it is equal to or greater
-- than every token the resource accepted before, and make the write it
-- carries in the same atomic step.
--
-- KEYS[1] the resource's fence (a string: the greatest token accepted)
-- KEYS[2] the key to write (op set and hset only)
-- KEYS[3] (set, hset) or KEYS[2] (check): optional, the lease store's token
--         counter (redisstore's <prefix>token). When given, a token greater
--         than the counter (a token the store never issued) is refused.
-- ARGV[1] op: 'read', 'check', 'set' or 'hset'
-- ARGV[2] the token offered: a canonical positive decimal (digits only, no
--         sign, no leading zero, no exponent, at most 19 digits, at most
--         2^63 - 1); ignored by 'read'
-- ARGV[3] the fence key prefix: KEYS[1] must start with it, and KEYS[2]
--         must not (a data key among the fence keys would rewind a fence)
-- ARGV[4] the lease store's key prefix, or '' when unknown: KEYS[2] must
--         not start with it (a data key there would forge a lease)
-- set:  ARGV[5] the value, ARGV[6] its TTL in ms ('0': none)
-- hset: ARGV[5], ARGV[6], ... field, value pairs
--
-- Returns {accepted (0|1), the token recorded before the call}, or
-- {-1, the counter} when the token is above the counter. A refused token
-- changes nothing. Bad arguments are errors that start with
-- "ERR tenure fence:" and change nothing. The write comes before the fence
-- moves, so a write that fails (WRONGTYPE) leaves the fence as it was.

-- canonical reports whether s is a token as tenure writes it: exact for
-- every int64, and the only spelling less() below can compare.
local function canonical(s)
  if type(s) ~= 'string' or #s > 19 or not string.find(s, '^[1-9][0-9]*$') then
    return false
  end
  return #s < 19 or s <= '9223372036854775807'
end

local function starts(s, prefix)
  return prefix ~= '' and string.sub(s, 1, #prefix) == prefix
end

-- less compares two canonical tokens (or '0') exactly.
local function less(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

local op, token, fencePrefix, storePrefix = ARGV[1], ARGV[2], ARGV[3] or '', ARGV[4] or ''
if fencePrefix == '' or not starts(KEYS[1], fencePrefix) then
  return redis.error_reply('ERR tenure fence: the fence key must start with the fence key prefix (ARGV[3])')
end
local recorded = redis.call('GET', KEYS[1]) or '0'
if op == 'read' then
  return {1, recorded}
end
if not canonical(token) then
  return redis.error_reply('ERR tenure fence: token ' .. string.format('%q', tostring(token)) ..
    ' is not a canonical positive decimal (digits only, no sign, no leading zero, at most 2^63 - 1)')
end
if op == 'set' or op == 'hset' then
  if not KEYS[2] or starts(KEYS[2], fencePrefix) or starts(KEYS[2], storePrefix) then
    return redis.error_reply('ERR tenure fence: the data key must not start with the fence key prefix or the lease store key prefix')
  end
elseif op ~= 'check' then
  return redis.error_reply('ERR tenure fence: unknown operation ' .. tostring(op))
end
local counterKey = KEYS[3]
if op == 'check' then
  counterKey = KEYS[2]
end
if counterKey then
  local issued = redis.call('GET', counterKey) or '0'
  if not canonical(issued) then
    issued = '0'
  end
  if less(issued, token) then
    return {-1, issued}
  end
end
if less(token, recorded) then
  return {0, recorded}
end
if op == 'set' then
  if ARGV[6] == '0' then
    redis.call('SET', KEYS[2], ARGV[5])
  else
    redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])
  end
elseif op == 'hset' then
  redis.call('HSET', KEYS[2], unpack(ARGV, 5))
end
if less(recorded, token) then
  redis.call('SET', KEYS[1], token)
end
return {1, recorded}
