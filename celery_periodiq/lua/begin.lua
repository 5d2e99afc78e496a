-- begin: the worker's guards before a run's body, atomically, in one call.
--
--   0. the message is consumed: a "queued" marker naming this task is cleared; a message
--      past its expiry (on this server's clock, not the worker's) is refused
--   1. duplicate tick: a tick whose run already began is dropped
--   2. tolerance drop: a scheduled run starting before last_run + min_gap is dropped
--   3. non-final check: under overlap "skip", a run of the entry that has not
--      reached a final state (its running marker exists) makes this run skip
--   4. otherwise the run starts: last_run = now, running marker set (TTL = the
--      run's hard limit, so a dead worker stops blocking), tick recorded
-- A retry of a run that already began (retries > 0) skips 1-3 and keeps its marker.
-- An entry that no longer exists gets no writes: a message published for it is refused
-- ("deleted"); a plain call of a declared task whose entry is not stored runs unguarded.
-- An entry whose keys hold the wrong type cannot be guarded: it is quarantined and the
-- run refused ("damaged"), with no other write.
--
-- KEYS[1] state    hash    <tag>:state:<name>   (last_run, last_status, counters n:*)
-- KEYS[2] running  string  <tag>:running:<name> (task id, TTL)
-- KEYS[3] queued   string  <tag>:queued:<name>  (task id of a published, unstarted run)
-- KEYS[4] started  zset    <tag>:started:<name> (nominal tick ms -> same; the newest 256)
-- KEYS[5] history  stream  <tag>:history:<name>
-- KEYS[6] entries  hash    <tag>:entries (name -> definition)
-- KEYS[7] quarantine hash  <tag>:quarantine (name -> why)
-- KEYS[8] due      zset    <tag>:due (name -> due instant)
-- KEYS[9] checkpoint string <tag>:checkpoint:<name> (its type is checked)
-- ARGV[1] task id
-- ARGV[2] tick: nominal instant (ms), or "" for a manual run (no tolerance drop)
-- ARGV[3] min_gap (ms): interval - tolerance, or 0
-- ARGV[4] overlap policy: "skip", "allow" or "buffer_one"
-- ARGV[5] marker TTL (ms)
-- ARGV[6] retries of this task id so far
-- ARGV[7] worker host
-- ARGV[8] history length
-- ARGV[9] now (ms) to use instead of the server clock, or "" (tests inject a clock here)
-- ARGV[10] entry name
-- ARGV[11] "1" if the message came from the beat or trigger() (the entry must exist)
-- ARGV[12] the message's expiry (ms), or ""
--
-- Returns {outcome, now_ms, last_run_ms or -1, note} where outcome is "started",
-- "resumed" (a retry), "duplicate", "dropped_too_soon", "skipped_overlap",
-- "expired", "deleted", "damaged" or "unguarded", and note says why a run was refused.
-- Every outcome but deleted, damaged and unguarded clears the state's waiting_since:
-- a worker consumed the entry's message.

local state, running, queued, started, history = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local task_id, tick, min_gap, overlap = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local ttl, retries, host, keep = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])

local now = clock_ms(ARGV[9])
if redis.call('HEXISTS', KEYS[6], ARGV[10]) == 0 then
  if ARGV[11] == '1' then return {'deleted', now, -1, ''} end
  return {'unguarded', now, -1, ''}
end
local problem = damaged({state, 'hash', running, 'string', queued, 'string', started, 'zset',
  history, 'stream', KEYS[9], 'string'})
if problem then
  redis.call('HSET', KEYS[7], ARGV[10], problem)
  redis.call('ZREM', KEYS[8], ARGV[10])
  return {'damaged', now, -1, problem}
end
local last = tonumber(redis.call('HGET', state, 'last_run') or '')

if redis.call('GET', queued) == task_id then redis.call('DEL', queued) end
redis.call('HDEL', state, 'waiting_since')

local function refuse(outcome, note)
  redis.call('HINCRBY', state, 'n:' .. outcome, 1)
  redis.call('XADD', history, 'MAXLEN', keep, '*', 'kind', outcome, 'at', now,
    'tick', tick, 'task_id', task_id, 'host', host, 'note', note)
  return {outcome, now, last or -1, note}
end

if retries > 0 then
  redis.call('SET', running, task_id, 'PX', ttl)
  redis.call('XADD', history, 'MAXLEN', keep, '*', 'kind', 'retry', 'at', now,
    'tick', tick, 'task_id', task_id, 'host', host, 'note', 'attempt ' .. (retries + 1))
  return {'resumed', now, last or -1, ''}
end
if ARGV[12] ~= '' and now > tonumber(ARGV[12]) then
  return refuse('expired', 'waited past its expiry, ' .. (now - tonumber(ARGV[12])) .. ' ms ago')
end
if tick ~= '' and redis.call('ZSCORE', started, tick) then
  return refuse('duplicate', 'this tick already began')
end
if tick ~= '' and last and now < last + min_gap then
  return refuse('dropped_too_soon', 'last run began ' .. (now - last) .. ' ms ago')
end
if overlap == 'skip' then
  local other = redis.call('GET', running)
  if other and other ~= task_id then
    return refuse('skipped_overlap', 'run ' .. other .. ' is unfinished')
  end
end

redis.call('HSET', state, 'last_run', now, 'last_task_id', task_id, 'last_status', 'running')
redis.call('HINCRBY', state, 'n:started', 1)
redis.call('SET', running, task_id, 'PX', ttl)
if tick ~= '' then
  redis.call('ZADD', started, tick, tick)
  redis.call('ZREMRANGEBYRANK', started, 0, -257)
end
redis.call('XADD', history, 'MAXLEN', keep, '*', 'kind', 'started', 'at', now,
  'tick', tick, 'task_id', task_id, 'host', host)
return {'started', now, last or -1, ''}
