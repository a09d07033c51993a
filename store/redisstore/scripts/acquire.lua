-- Acquire: for each lease of the batch, start a new tenure when the lease
-- is absent, released or expired by the server's clock and not kept for
-- another follower, else report who holds it and, when the caller waits,
-- put it in line. Atomic: one script, one round trip for the whole batch.
--
-- KEYS[1] the token counter (string, the last token handed out, never
--         deleted); then for each lease (3 per lease):
--           the lease record (hash, never expires; kept_label,
--           kept_instance and kept_until, in server microseconds, name the
--           follower a released lease is kept for),
--           the held key (string, the tenure's token, PX TTL = the expiry),
--           the line (hash: "label\ninstance" -> "ticket until", both in
--           server microseconds; entries past until are forgotten)
-- ARGV[1] notification channel; then for each lease (6 per lease): holder
--         label, holder instance, TTL in ms, lease name, payload, wait ('1'
--         or '0')
--
-- Returns 11 elements per lease, in the order of the batch: {acquired
-- (0|1), label, instance, token, seq, remaining ms, payload, server TIME in
-- microseconds, place in line, next label, next instance}: the new tenure,
-- or the current one when it is held (then TIME is 0), or, when the lease
-- is kept for another follower, no holder, the time left of the hold and
-- that follower.
local counter, channel = KEYS[1], ARGV[1]
local now = redis.call('TIME')
local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])

-- lineup forgets the followers of line past their time and returns the
-- others as {member, ticket} pairs, first in line first.
local function lineup(line)
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

-- acquire attempts one lease and returns its 11 elements.
local function acquire(record, held, line, label, instance, ttl, name, payload, wait)
  local cur = redis.call('HMGET', record, 'label', 'instance', 'token', 'seq', 'released', 'payload',
    'kept_label', 'kept_instance', 'kept_until')
  local pttl = redis.call('PTTL', held)
  local member = label .. '\n' .. instance

  local kept = cur[9] and tonumber(cur[9]) > clock and not (cur[7] == label and cur[8] == instance)
  if pttl >= 0 or kept then
    local reply
    if pttl >= 0 then
      reply = {0, cur[1] or '', cur[2] or '', tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, pttl, cur[6] or '', 0, 0, '', ''}
    else
      reply = {0, '', '', tonumber(cur[3]) or 0, tonumber(cur[4]) or 0, math.ceil((tonumber(cur[9]) - clock) / 1000), '', 0, 0,
        cur[7], cur[8]}
    end
    if wait == '1' then
      local place = 0
      local entry = redis.call('HGET', line, member)
      local ticket = entry and string.match(entry, '^(%d+) ') or string.format('%d', clock)
      redis.call('HSET', line, member, ticket .. ' ' .. string.format('%d', clock + (reply[6] + 2 * tonumber(ttl)) * 1000))
      for _, w in ipairs(lineup(line)) do
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
  -- tokens grow across a loss of all data (a restart without persistence,
  -- a failover to a replica that lacked the last writes): a later grant
  -- reads a later TIME. Every value stays below 2^53, so Lua's doubles are
  -- exact: TIME in microseconds reaches 2^53 in the year 2255.
  local token = math.max(tonumber(redis.call('GET', counter)) or 0, tonumber(cur[3]) or 0) + 1
  if clock > token then
    token = clock
  end
  if token >= 9007199254740992 then
    return nil
  end
  redis.call('SET', counter, string.format('%d', token))

  redis.call('HSET', record,
    'label', label, 'instance', instance,
    'token', string.format('%d', token), 'seq', '1',
    'acquired_s', now[1], 'acquired_us', now[2], 'released', '0', 'payload', payload,
    'kept_label', '', 'kept_instance', '', 'kept_until', '0')
  redis.call('SET', held, string.format('%d', token), 'PX', ttl)
  redis.call('HDEL', line, member)

  -- Every new tenure is announced, so that followers wait for its expiry.
  redis.call('PUBLISH', channel, cjson.encode({n = name, k = 'a', hl = label, hi = instance, ttl = tonumber(ttl) * 1000}))
  return {1, label, instance, token, 1, tonumber(ttl), payload, clock, 0, '', ''}
end

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
end
return results
