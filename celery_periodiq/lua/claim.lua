-- claim: take due ticks, atomically, for one beat instance.
--
-- A due entry is moved out of the due set and into the in-flight set, so no
-- other beat can claim the same tick. A tick stays in flight until the beat
-- acknowledges it (ack.lua). A tick whose lease ran out while its owner's
-- heartbeat is gone (a dead beat) is handed to the caller unchanged, so it is
-- published again with the same task id. "Now" is this server's clock.
--
-- KEYS[1] due       zset  entry name -> due instant (ms, jitter applied)
-- KEYS[2] inflight  zset  tick id -> when to look at the claim again (ms)
-- KEYS[3] ticks     hash  tick id -> claim JSON
-- KEYS[4] entries   hash  entry name -> definition JSON
-- KEYS[5] beats     zset  beat id -> heartbeat expiry (ms)
-- ARGV[1] key tag, e.g. "{periodiq}"; per-entry keys are "<tag>:state:<name>" etc.
-- ARGV[2] caller's beat id
-- ARGV[3] most ticks to return
-- ARGV[4] lease (ms)
-- ARGV[5] now (ms) to use instead of the server clock, or "" (tests inject a clock here)
-- ARGV[6] horizon (ms): also claim ticks due this soon, so the caller can publish them
--         the moment they are due instead of starting its round trip then
--
-- Returns {now_ms, next_due_ms or -1, next_recheck_ms or -1, now_us (0-999, the clock's
-- microseconds past now_ms), id1, claim1, definition1, id2, ...}
-- where claim is JSON {name, nominal, due, claimed, owner, running, queued, version, prev,
-- taken}
-- (nominal is the tick's due instant before jitter, ms; prev the entry's previous scheduled
-- tick, ms, or -1; taken counts takeovers)
-- and definition is the entry JSON, or "" when the entry has vanished.
--
-- Touches per claimed entry: <tag>:state:<name> (read: next, version, prev),
-- <tag>:running:<name> and <tag>:queued:<name> (read).

local due, inflight, ticks, entries, beats = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local tag, me = ARGV[1], ARGV[2]
local batch, lease = tonumber(ARGV[3]), tonumber(ARGV[4])

local now, micros = 0, 0
if ARGV[5] and ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local clock = redis.call('TIME')
  now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  micros = tonumber(clock[2]) % 1000
end
local horizon = tonumber(ARGV[6] or '0') or 0
local out = {now, -1, -1, micros}
local taken = 0

-- 1. Claims whose lease ran out: keep them with a live owner, take the rest.
local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, batch)
for _, id in ipairs(expired) do
  local raw = redis.call('HGET', ticks, id)
  if not raw then
    redis.call('ZREM', inflight, id)
  else
    local claim = cjson.decode(raw)
    local alive = redis.call('ZSCORE', beats, claim.owner)
    if claim.owner ~= me and alive and tonumber(alive) > now then
      -- look again the moment the owner's heartbeat would run out
      redis.call('ZADD', inflight, tonumber(alive), id)
    else
      claim.owner = me
      claim.taken = (claim.taken or 0) + 1
      raw = cjson.encode(claim)
      redis.call('HSET', ticks, id, raw)
      redis.call('ZADD', inflight, now + lease, id)
      local definition = redis.call('HGET', entries, claim.name) or ''
      out[#out + 1] = id
      out[#out + 1] = raw
      out[#out + 1] = definition
      taken = taken + 1
    end
  end
end

-- 2. Due entries, oldest first.
if taken < batch then
  local found = redis.call('ZRANGEBYSCORE', due, '-inf', now + horizon, 'WITHSCORES',
    'LIMIT', 0, batch - taken)
  for index = 1, #found, 2 do
    local name, due_at = found[index], tonumber(found[index + 1])
    redis.call('ZREM', due, name)
    local definition = redis.call('HGET', entries, name)
    if definition then
      local state = redis.call('HMGET', tag .. ':state:' .. name, 'next', 'version', 'prev')
      local nominal = tonumber(state[1])
      if nominal then
        local id = name .. '@' .. state[1]
        local claim = cjson.encode({
          name = name,
          nominal = nominal,
          due = due_at,
          claimed = now,
          owner = me,
          running = redis.call('EXISTS', tag .. ':running:' .. name),
          queued = redis.call('EXISTS', tag .. ':queued:' .. name),
          version = tonumber(state[2]) or 0,
          prev = tonumber(state[3]) or -1,
          taken = 0,
        })
        redis.call('HSET', ticks, id, claim)
        redis.call('ZADD', inflight, now + lease, id)
        out[#out + 1] = id
        out[#out + 1] = claim
        out[#out + 1] = definition
      end
    end
  end
end

local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
if first[2] then out[2] = tonumber(first[2]) end
local recheck = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
if recheck[2] then out[3] = tonumber(recheck[2]) end
return out
