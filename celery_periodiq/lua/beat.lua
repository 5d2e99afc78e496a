-- beat: register, refresh or unregister a beat instance's heartbeat.
--
-- KEYS[1] beats  zset  beat id -> heartbeat expiry (ms)
-- ARGV[1] key tag; ARGV[2] beat id; ARGV[3] "start", "alive" or "stop"
-- ARGV[4] heartbeat TTL (ms)
-- ARGV[5..] field, value pairs for the beat's hash (host, pid, version, ...)
--
-- Returns {now_ms, flag}: for "start", flag is 1 when no other beat was alive
-- (this beat starts the cluster: @reboot entries fire); for "stop", 1 when
-- no other beat is alive any more (@shutdown entries fire); else 0.
--
-- Touches: <tag>:beat:<id> (hash with TTL).

local beats = KEYS[1]
local tag, id, action, ttl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', beats, '-inf', now)
local key = tag .. ':beat:' .. id
local flag = 0

if action == 'stop' then
  redis.call('ZREM', beats, id)
  redis.call('DEL', key)
  if redis.call('ZCARD', beats) == 0 then flag = 1 end
  return {now, flag}
end

if action == 'start' and redis.call('ZCARD', beats) == 0 then flag = 1 end
redis.call('ZADD', beats, now + ttl, id)
if #ARGV >= 6 then
  redis.call('HSET', key, unpack(ARGV, 5))
end
if action == 'start' then redis.call('HSET', key, 'started', now) end
redis.call('HSET', key, 'seen', now)
redis.call('PEXPIRE', key, ttl)
return {now, flag}
