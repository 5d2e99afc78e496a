-- ack: settle claimed ticks after publishing, and schedule each entry's next tick.
--
-- Only the beat that owns a claim may settle it; a claim taken over by
-- another beat is left alone. The next tick is written only if the entry
-- still exists, is not paused or quarantined, and has not been changed since
-- the claim (a writer that changed it already scheduled it). An entry whose keys
-- hold the wrong type is quarantined instead of written: its claim is settled all
-- the same, so nothing is published twice, and no other entry of the batch suffers.
--
-- KEYS[1] due         zset  entry name -> due instant (ms, jitter applied)
-- KEYS[2] inflight    zset  tick id -> recheck instant (ms)
-- KEYS[3] ticks       hash  tick id -> claim JSON
-- KEYS[4] entries     hash  entry name -> definition JSON
-- KEYS[5] quarantine  hash  entry name -> why it is quarantined
-- ARGV[1] key tag; ARGV[2] caller's beat id; ARGV[3] history length
-- ARGV[4..] one JSON object per tick:
--   id          tick id from claim.lua
--   name        entry name
--   version     entry version seen at claim
--   next, due   nominal and jittered instants of the next tick (ms), or null when the schedule ended
--   counts      {reason = n} added to the entry's counters ("n:<reason>")
--   events      list of {kind, tick, task_id, missed, note} appended to history
--   last        {field = value} written to the state hash (last_enqueued, last_tick, ...)
--   queued      {task_id, ttl_ms} marks a published run that has not started, or null
--   quarantine  reason text: flag the entry as invalid and stop scheduling it, or null
--   prev        the newest tick this claim handled (ms): the next tick's tolerance counts from it
--
-- Returns the number of ticks settled.
--
-- Touches per entry: the types of its keys, <tag>:state:<name> (hash; waiting_since is
-- set when a run is published and cleared by begin.lua), <tag>:history:<name> (stream),
-- <tag>:queued:<name> (string with TTL).

local due, inflight, ticks, entries, quarantine = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local tag, me, keep = ARGV[1], ARGV[2], tonumber(ARGV[3])

local now = clock_ms('')
local settled = 0

for i = 4, #ARGV do
  local a = cjson.decode(ARGV[i])
  local raw = redis.call('HGET', ticks, a.id)
  local mine = raw and decoded(raw).owner == me
  if mine then
    redis.call('ZREM', inflight, a.id)
    redis.call('HDEL', ticks, a.id)
    settled = settled + 1
  end
  -- A vanished entry gets no state back: deleting it must stay final.
  if mine and redis.call('HEXISTS', entries, a.name) == 1 then
    local problem = damaged(entry_keys(tag, a.name))
    if problem == nil and a.quarantine ~= nil and a.quarantine ~= cjson.null then
      problem = a.quarantine
    end
    if problem then
      redis.call('HSET', quarantine, a.name, problem)
      redis.call('ZREM', due, a.name)
    else
      local state = tag .. ':state:' .. a.name
      local current = redis.call('HMGET', state, 'version', 'paused')
      local unchanged = (tonumber(current[1]) or 0) == tonumber(a.version)
      local held = current[2] == '1' or redis.call('HEXISTS', quarantine, a.name) == 1
      if unchanged and not held then
        if a.next ~= nil and a.next ~= cjson.null then
          redis.call('ZADD', due, a.due, a.name)
          redis.call('HSET', state, 'next', a.next)
        else
          redis.call('HSET', state, 'next', '')
        end
      end
      if a.prev ~= nil and a.prev ~= cjson.null then
        redis.call('HSET', state, 'prev', a.prev)
      end
      if a.counts then
        for reason, n in pairs(a.counts) do
          redis.call('HINCRBY', state, 'n:' .. reason, n)
        end
        if a.counts.enqueued then redis.call('HSETNX', state, 'waiting_since', now) end
      end
      if a.last then
        for field, value in pairs(a.last) do
          redis.call('HSET', state, field, value)
        end
      end
      if a.queued ~= nil and a.queued ~= cjson.null then
        redis.call('SET', tag .. ':queued:' .. a.name, a.queued[1], 'PX', a.queued[2])
      end
      if a.events then
        for _, e in ipairs(a.events) do
          redis.call('XADD', tag .. ':history:' .. a.name, 'MAXLEN', keep, '*',
            'kind', e[1], 'at', now, 'tick', e[2], 'task_id', e[3], 'missed', e[4], 'note', e[5])
        end
      end
    end
  end
end
return settled
