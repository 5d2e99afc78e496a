-- beat: register, refresh or unregister a beat instance's heartbeat.
--
-- KEYS[1] beats        zset  beat id -> heartbeat expiry (ms)
-- KEYS[2] beat         hash  this beat's heartbeat (host, pid, version, started, seen, ...), TTL
-- KEYS[3] declarers    hash  live beat id -> digest of the declaration set it runs with
-- KEYS[4] declaration  hash  this beat's declaration set (declare.lua): its TTL is refreshed
-- KEYS[5] muted        zset  live beat id that cannot publish -> heartbeat expiry (ms)
-- ARGV[1] beat id; ARGV[2] "start", "alive" or "stop"
-- ARGV[3] heartbeat TTL (ms)
-- ARGV[4] the digest of this beat's declaration set ("" none); ARGV[5] its TTL (ms)
-- ARGV[6..] field, value pairs for the beat's hash (host, pid, version, ...); a field
--   "publishing" of "0" says the beat is cut off from its broker (it joins "muted")
--
-- Returns {now_ms, flag, registered, muted, live beat id, its digest, ...}: for "start", flag
-- is 1 when no other beat was alive (this beat starts the cluster: @reboot entries
-- fire); for "stop", 1 when no other beat is alive any more (@shutdown entries fire);
-- else 0. registered is 1 when this beat's declaration set is stored (0: declare it
-- again). muted is a JSON array of the live beats that cannot publish. The ids are the
-- beats alive now, each with the digest it declares ("" for a beat that says none);
-- every beat computes the same ring of partitions from those that are not muted.
-- For "stop", only {now_ms, flag}.

local beats, key, declarers, declaration, muted = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id, action, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local digest, declaration_ttl = ARGV[4], tonumber(ARGV[5])

local now = clock_ms('')
redis.call('ZREMRANGEBYSCORE', beats, '-inf', now)
if wrong_type(declarers, 'hash') then redis.call('DEL', declarers) end
if wrong_type(muted, 'zset') then redis.call('DEL', muted) end
redis.call('ZREMRANGEBYSCORE', muted, '-inf', now)
local flag = 0

if action == 'stop' then
  redis.call('ZREM', beats, id)
  redis.call('DEL', key)
  redis.call('HDEL', declarers, id)
  redis.call('ZREM', muted, id)
  if redis.call('ZCARD', beats) == 0 then flag = 1 end
  return {now, flag}
end

if action == 'start' and redis.call('ZCARD', beats) == 0 then flag = 1 end
redis.call('ZADD', beats, now + ttl, id)
local publishing = true
if #ARGV >= 7 then
  redis.call('HSET', key, unpack(ARGV, 6))
  for i = 6, #ARGV - 1, 2 do
    if ARGV[i] == 'publishing' and ARGV[i + 1] == '0' then publishing = false end
  end
end
if publishing then
  redis.call('ZREM', muted, id)
else
  redis.call('ZADD', muted, now + ttl, id)
end
if action == 'start' then redis.call('HSET', key, 'started', now) end
redis.call('HSET', key, 'seen', now)
redis.call('PEXPIRE', key, ttl)

local registered = 0
if digest ~= '' then
  redis.call('HSET', declarers, id, digest)
  if redis.call('TYPE', declaration)['ok'] == 'hash'
      and redis.call('HEXISTS', declaration, 'gen') == 1 then
    redis.call('PEXPIRE', declaration, declaration_ttl)
    registered = 1
  end
else
  redis.call('HDEL', declarers, id)
end

local silent = redis.call('ZRANGE', muted, 0, -1)
local result = {now, flag, registered, #silent > 0 and cjson.encode(silent) or '[]'}
local live = redis.call('ZRANGE', beats, 0, -1)
local said = {}
for _, beat in ipairs(live) do said[beat] = true end
for _, beat in ipairs(redis.call('HKEYS', declarers)) do
  if not said[beat] then redis.call('HDEL', declarers, beat) end  -- its heartbeat ran out
end
local digests = #live > 0 and redis.call('HMGET', declarers, unpack(live)) or {}
for i, beat in ipairs(live) do
  result[#result + 1] = beat
  result[#result + 1] = digests[i] or ''
end
return result
