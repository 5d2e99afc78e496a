-- finish: record how a run ended and, if it is final, clear its running marker.
--
-- A Celery retry is not final: the marker stays (its TTL stretched to cover the
-- retry's countdown) until the last attempt ends.
--
-- KEYS[1] state    hash    <tag>:state:<name>
-- KEYS[2] running  string  <tag>:running:<name>
-- KEYS[3] history  stream  <tag>:history:<name>
-- KEYS[4] entries  hash    <tag>:entries (name -> definition)
-- KEYS[5] quarantine hash  <tag>:quarantine (name -> why)
-- KEYS[6] due      zset    <tag>:due (name -> due instant)
-- ARGV[1] task id
-- ARGV[2] tick (ms) or ""
-- ARGV[3] outcome: "succeeded", "failed", "timeboxed", "revoked" or "retrying"
-- ARGV[4] error text ("Type: message") or ""
-- ARGV[5] duration (ms)
-- ARGV[6] worker host
-- ARGV[7] history length
-- ARGV[8] "1" if final, "0" for a retry, "2" for a message that never ran (revoked or
--         expired in the queue): counted and recorded, the last run's status untouched
-- ARGV[9] marker TTL for a retry (ms), or 0
-- ARGV[10] now (ms) instead of the server clock, or ""
-- ARGV[11] entry name: nothing is written for an entry that no longer exists
--
-- Returns the number of markers cleared (0 or 1). Nothing is written for an entry whose
-- keys hold the wrong type: it is quarantined instead.

local state, running, history = KEYS[1], KEYS[2], KEYS[3]
local task_id, tick, outcome, err = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local duration, host, keep, kind = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]

local now = clock_ms(ARGV[10])
if redis.call('HEXISTS', KEYS[4], ARGV[11]) == 0 then return 0 end
local problem = damaged({state, 'hash', running, 'string', history, 'stream'})
if problem then
  redis.call('HSET', KEYS[5], ARGV[11], problem)
  redis.call('ZREM', KEYS[6], ARGV[11])
  return 0
end
local cleared = 0
local holder = redis.call('GET', running)
if kind == '1' or (kind == '2' and holder == task_id) then
  if holder == task_id then
    redis.call('DEL', running)
    cleared = 1
  end
  redis.call('HSET', state, 'last_status', outcome, 'last_finished', now,
    'last_duration', duration, 'last_error', err)
elseif kind == '0' and holder == task_id then
  redis.call('PEXPIRE', running, tonumber(ARGV[9]))
end
redis.call('HINCRBY', state, 'n:' .. outcome, 1)
redis.call('XADD', history, 'MAXLEN', keep, '*', 'kind', outcome, 'at', now, 'tick', tick,
  'task_id', task_id, 'host', host, 'duration', duration, 'error', err)
return cleared
