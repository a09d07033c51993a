-- AcquireSlot: the leases of KEYS and ARGV are the slots of one name, in
-- slot order; they are attempted in that order with acquire (above,
-- acquire.lua's) and the first one acquired ends the script. Returns the
-- 11 elements of each slot attempted: the held ones and, when one was
-- free, the slot taken, last.
local results = {}
for i = 1, (#KEYS - 1) / 3 do
  local k, a = 3 * i - 1, 6 * i - 4
  local r = acquire(KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
  if r == nil then
    return redis.error_reply('ERR tenure acquire: the token counter ' .. counter ..
      ' is at 2^53 or beyond, where Lua cannot count exactly; tokens cannot grow any more')
  end
  for _, v in ipairs(r) do
    results[#results + 1] = v
  end
  if r[1] == 1 then
    break
  end
end
return results
