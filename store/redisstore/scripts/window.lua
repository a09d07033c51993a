-- Windows (store.Windower): begin or finish one window of a lease, in one
-- atomic script that first finds the lease held by the server's clock with
-- exactly the given holder and token (the compare of release.lua). A
-- window is a field of the lease's windows hash: the window key, to
-- "state\nlabel\ninstance\ntoken\nattempts\nstarted_us\nfinished_us"
-- (labels, instances and window keys hold no control characters; times
-- are the server's TIME in microseconds, finished 0 while started). The
-- hash never expires: a window that ran stays refused.
--
-- KEYS[1] the lease's record, KEYS[2] its held key, KEYS[3] its windows
-- ARGV[1] 'start', 'finish' or 'get' (read the window, change nothing),
--         ARGV[2] holder label, ARGV[3] holder
--         instance, ARGV[4] token, ARGV[5] window key ('' with start: derive
--         it from ARGV[6], the period in milliseconds, on the server's
--         clock: '@' .. start_ms .. '+' .. period_ms); with start ARGV[7]
--         '1' to retry a window begun and not completed; with finish
--         ARGV[6] the outcome ('completed' or 'failed')
--
-- Returns {outcome, key, window}: outcome 'get', 'not-held', 'begun', 'again',
-- 'refused', 'fenced' (start), 'finished' or 'refused' (finish); window
-- the field's value after the call ('' when there is none).
local now = redis.call('TIME')
local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])
local label, instance, token = ARGV[2], ARGV[3], tonumber(ARGV[4])
local held = false
if redis.call('PTTL', KEYS[2]) >= 0 then
  local cur = redis.call('HMGET', KEYS[1], 'label', 'instance', 'token')
  held = cur[1] == label and cur[2] == instance and tonumber(cur[3]) == token
end
local key = ARGV[5]
if ARGV[1] == 'start' and key == '' then
  local period = tonumber(ARGV[6])
  local ms = math.floor(clock / 1000)
  key = string.format('@%d+%d', ms - ms % period, period)
end
if ARGV[1] == 'get' then
  return {'get', key, redis.call('HGET', KEYS[3], key) or ''}
end
if not held then
  return {'not-held', key, ''}
end

local function parse(v)
  local f = {}
  for part in string.gmatch(v .. '\n', '([^\n]*)\n') do
    f[#f + 1] = part
  end
  return {state = f[1], label = f[2], instance = f[3], token = tonumber(f[4]), attempts = tonumber(f[5]),
          started = f[6], finished = f[7]}
end
local function format(w)
  return table.concat({w.state, w.label, w.instance, string.format('%d', w.token), string.format('%d', w.attempts),
                       w.started, w.finished}, '\n')
end

local value = redis.call('HGET', KEYS[3], key)
local w = value and parse(value)
if ARGV[1] == 'start' then
  if w then
    if w.token > token then
      return {'fenced', key, value}
    elseif w.state == 'completed' then
      return {'refused', key, value}
    elseif w.state == 'started' and w.token == token and w.label == label and w.instance == instance then
      return {'again', key, value}
    elseif ARGV[7] ~= '1' then
      return {'refused', key, value}
    end
  end
  local attempts = 1
  if w then
    attempts = w.attempts + 1
  end
  value = format({state = 'started', label = label, instance = instance, token = token, attempts = attempts,
                  started = string.format('%d', clock), finished = '0'})
  redis.call('HSET', KEYS[3], key, value)
  return {'begun', key, value}
end

local outcome = ARGV[6]
if not w or w.token ~= token or w.label ~= label or w.instance ~= instance
    or (w.state ~= 'started' and w.state ~= outcome) then
  return {'refused', key, value or ''}
end
if w.state == 'started' then
  w.state, w.finished = outcome, string.format('%d', clock)
  value = format(w)
  redis.call('HSET', KEYS[3], key, value)
end
return {'finished', key, value}
