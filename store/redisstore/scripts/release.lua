-- Release: expire each lease of the batch now when it is held by the
-- server's clock with exactly the given holder and token, keep it for the
-- first follower in line for ARGV[2] microseconds (store.Handoff), and
-- announce both. The record and the token counter stay, so the next tenure
-- gets a greater token. Atomic: one script, one round trip for the whole
-- batch.
--
-- KEYS: for each lease, its record, its held key and its line (3 per
--       lease; see acquire.lua)
-- ARGV[1] notification channel, ARGV[2] the hold in microseconds; then for
--         each lease, holder label, holder instance, token and lease name
--         (4 per lease)
--
-- Returns one element per lease, in the order of the batch: 1 when
-- released, 0 when the lease was not held that way.
local now = redis.call('TIME')
local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])
local results = {}
for i = 1, #KEYS / 3 do
  local record, held, line = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local a = 2 + (i - 1) * 4
  results[i] = 0
  if redis.call('PTTL', held) >= 0 then
    local cur = redis.call('HMGET', record, 'label', 'instance', 'token')
    if cur[1] == ARGV[a + 1] and cur[2] == ARGV[a + 2] and tonumber(cur[3]) == tonumber(ARGV[a + 3]) then
      redis.call('DEL', held)
      -- The head of the line: the live follower with the lowest ticket.
      local head, first = '', nil
      local all = redis.call('HGETALL', line)
      for j = 1, #all, 2 do
        local ticket, untl = string.match(all[j + 1], '^(%d+) (%d+)$')
        if ticket and tonumber(untl) > clock then
          if first == nil or tonumber(ticket) < first then
            head, first = all[j], tonumber(ticket)
          end
        else
          redis.call('HDEL', line, all[j])
        end
      end
      local label, instance = string.match(head, '^(.*)\n(.*)$')
      if label then
        redis.call('HSET', record, 'released', '1', 'kept_label', label, 'kept_instance', instance,
          'kept_until', string.format('%d', clock + tonumber(ARGV[2])))
      else
        label, instance = '', ''
        redis.call('HSET', record, 'released', '1', 'kept_label', '', 'kept_instance', '', 'kept_until', '0')
      end
      redis.call('PUBLISH', ARGV[1], cjson.encode({n = ARGV[a + 4], k = 'r', nl = label, ni = instance}))
      results[i] = 1
    end
  end
end
return results
