-- Acquire: start a new tenure when the lease is absent, released or expired
-- by the server's clock and not kept for another follower, else report who
-- holds it and, when the caller waits, put it in line. Atomic: one script.
--
-- KEYS[1] the lease record (hash, never expires; kept_label, kept_instance
--         and kept_until, in server microseconds, name the follower a
--         released lease is kept for)
-- KEYS[2] the held key (string, the tenure's token, PX TTL = the expiry)
-- KEYS[3] the token counter (string, the last token handed out, never deleted)
-- KEYS[4] the line (hash: "label\ninstance" -> "ticket until", both in
--         server microseconds; entries past until are forgotten)
-- ARGV[1] holder label, ARGV[2] holder instance, ARGV[3] TTL in ms,
-- ARGV[4] notification channel, ARGV[5] lease name, ARGV[6] payload,
-- ARGV[7] wait ('1' or '0')
--
-- Returns {acquired (0|1), label, instance, token, seq, remaining ms,
-- payload, server TIME in microseconds, place in line, next label, next
-- instance}: the new tenure, or the current one when it is held (then TIME
-- is 0), or, when the lease is kept for another follower, no holder, the
-- time left of the hold and that follower.
local record, held, counter, line = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local cur = redis.call('HMGET', record, 'label', 'instance', 'token', 'seq', 'released', 'payload',
  'kept_label', 'kept_instance', 'kept_until')
local pttl = redis.call('PTTL', held)
local now = redis.call('TIME')
local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])
local member = ARGV[1] .. '\n' .. ARGV[2]

-- lineup forgets the followers past their time and returns the others as
-- {member, ticket} pairs, first in line first.
local function lineup()
  local all = redis.call('HGETALL', line)
  local live = {}
  for i = 1, #all, 2 do
    local ticket, untl = string.match(all[i + 1], '^(%d+) (%d+)$')
    if ticket and tonumber(untl) > clock then
      live[#live + 1] = {all[i], tonumber(ticket)}
    else
      redis.call('HDEL', line, all[i])
    end
  end
  table.sort(live, function(a, b) return a[2] < b[2] end)
  return live
end

local kept = cur[9] and tonumber(cur[9]) > clock and not (cur[7] == ARGV[1] and cur[8] == ARGV[2])
if pttl >= 0 or kept then
  local reply
  if pttl >= 0 then
    reply = {0, cur[1] or '', cur[2] or '', tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, pttl, cur[6] or '', 0, 0, '', ''}
  else
    reply = {0, '', '', tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, math.ceil((tonumber(cur[9]) - clock) / 1000), '', 0, 0,
      cur[7], cur[8]}
  end
  if ARGV[7] == '1' then
    local place = 0
    local entry = redis.call('HGET', line, member)
    local ticket = entry and string.match(entry, '^(%d+) ') or string.format('%d', clock)
    redis.call('HSET', line, member, ticket .. ' ' .. string.format('%d', clock + (reply[6] + 2 * tonumber(ARGV[3])) * 1000))
    for _, w in ipairs(lineup()) do
      place = place + 1
      if w[1] == member then
        break
      end
    end
    reply[9] = place
  end
  return reply
end

-- The token is max(counter + 1, last + 1, server TIME in microseconds),
-- stored back in the counter. The counter makes tokens grow while the
-- server keeps its data; the last tenure's token is a floor for this name
-- when the counter alone was lost (deleted, evicted); the clock makes
-- tokens grow across a loss of all data (a restart without persistence, a
-- failover to a replica that lacked the last writes): a later grant reads a
-- later TIME. Every value stays below 2^53, so Lua's doubles are exact:
-- TIME in microseconds reaches 2^53 in the year 2255.
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
  'acquired_s', now[1], 'acquired_us', now[2], 'released', '0', 'payload', ARGV[6],
  'kept_label', '', 'kept_instance', '', 'kept_until', '0')
redis.call('SET', held, string.format('%d', token), 'PX', ARGV[3])
redis.call('HDEL', line, member)

-- Every new tenure is announced, so that followers wait for its expiry.
redis.call('PUBLISH', ARGV[4], cjson.encode({n = ARGV[5], k = 'a', hl = ARGV[1], hi = ARGV[2], ttl = tonumber(ARGV[3]) * 1000}))
return {1, ARGV[1], ARGV[2], token, 1, tonumber(ARGV[3]), ARGV[6], clock, 0, '', ''}
