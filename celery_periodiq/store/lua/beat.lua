-- beat: register, refresh or unregister a beat instance's heartbeat.
--
-- KEYS[1] beats        zset  beat id -> heartbeat expiry (ms)
-- KEYS[2] beat         hash  this beat's heartbeat (host, pid, version, started, seen, ...), TTL
-- KEYS[3] declarers    hash  live beat id -> digest of the declaration set it runs with
-- KEYS[4] declaration  hash  this beat's declaration set (declare.lua): its TTL is refreshed
-- ARGV[1] beat id; ARGV[2] "start", "alive" or "stop"
-- ARGV[3] heartbeat TTL (ms)
-- ARGV[4] the digest of this beat's declaration set ("" none); ARGV[5] its TTL (ms)
-- ARGV[6..] field, value pairs for the beat's hash (host, pid, version, ...)
--
-- Returns {now_ms, flag, registered, live beat id, its digest, ...}: for "start", flag
-- is 1 when no other beat was alive (this beat starts the cluster: @reboot entries
-- fire); for "stop", 1 when no other beat is alive any more (@shutdown entries fire);
-- else 0. registered is 1 when this beat's declaration set is stored (0: declare it
-- again). The ids are the beats alive now, from which every beat computes the same
-- ring of partitions, each with the digest it declares ("" for a beat that says none).

local beats, key, declarers, declaration = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, action, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local digest, declaration_ttl = ARGV[4], tonumber(ARGV[5])

local now = clock_ms('')
redis.call('ZREMRANGEBYSCORE', beats, '-inf', now)
if wrong_type(declarers, 'hash') then redis.call('DEL', declarers) end
local flag = 0

if action == 'stop' then
  redis.call('ZREM', beats, id)
  redis.call('DEL', key)
  redis.call('HDEL', declarers, id)
  if redis.call('ZCARD', beats) == 0 then flag = 1 end
  return {now, flag}
end

if action == 'start' and redis.call('ZCARD', beats) == 0 then flag = 1 end
redis.call('ZADD', beats, now + ttl, id)
if #ARGV >= 7 then
  redis.call('HSET', key, unpack(ARGV, 6))
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

local result = {now, flag, registered}
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
