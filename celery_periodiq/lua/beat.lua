-- beat: register, refresh or unregister a beat instance's heartbeat.
--
-- KEYS[1] beats  zset  beat id -> heartbeat expiry (ms)
-- KEYS[2] beat   hash  this beat's heartbeat (host, pid, version, started, seen, ...), TTL
-- ARGV[1] beat id; ARGV[2] "start", "alive" or "stop"
-- ARGV[3] heartbeat TTL (ms)
-- ARGV[4..] field, value pairs for the beat's hash (host, pid, version, ...)
--
-- Returns {now_ms, flag, live beat id, ...}: for "start", flag is 1 when no other beat
-- was alive (this beat starts the cluster: @reboot entries fire); for "stop", 1 when
-- no other beat is alive any more (@shutdown entries fire); else 0. The ids are the
-- beats alive now, from which every beat computes the same ring of partitions.

local beats, key = KEYS[1], KEYS[2]
local id, action, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])

local now = clock_ms('')
redis.call('ZREMRANGEBYSCORE', beats, '-inf', now)
local flag = 0

if action == 'stop' then
  redis.call('ZREM', beats, id)
  redis.call('DEL', key)
  if redis.call('ZCARD', beats) == 0 then flag = 1 end
  return {now, flag}
end
local function with_live(result)
  for _, live in ipairs(redis.call('ZRANGE', beats, 0, -1)) do result[#result + 1] = live end
  return result
end

if action == 'start' and redis.call('ZCARD', beats) == 0 then flag = 1 end
redis.call('ZADD', beats, now + ttl, id)
if #ARGV >= 5 then
  redis.call('HSET', key, unpack(ARGV, 4))
end
if action == 'start' then redis.call('HSET', key, 'started', now) end
redis.call('HSET', key, 'seen', now)
redis.call('PEXPIRE', key, ttl)
return with_live({now, flag})
