-- release: a beat cut off from its broker gives up its claims of one partition, so that
-- the other beats take them over now rather than after their lease.
--
-- The beat leaves the partition's live beats (its claims are then no longer kept for
-- it) and each claim of its own whose lease has not run out is made due for a look now.
-- Claims are not changed otherwise: whoever takes one over publishes it with the same
-- task id, as after a crash.
--
-- KEYS[1] inflight  zset  tick id -> when to look at the claim again (ms)
-- KEYS[2] ticks     hash  tick id -> claim JSON (read: owner)
-- KEYS[3] alive     zset  beat id -> heartbeat expiry (ms)
-- ARGV[1] the beat's id
--
-- Returns how many claims the beat gave up.

local inflight, ticks, alive, me = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local now = clock_ms('')
redis.call('ZREM', alive, me)
-- claim.lua writes each claim with cjson: its owner field reads exactly so
local owned = '"owner":' .. cjson.encode(me)
local given = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', inflight, '(' .. now, '+inf')) do
  local raw = redis.call('HGET', ticks, id)
  if raw and string.find(raw, owned, 1, true) then
    redis.call('ZADD', inflight, now, id)
    given = given + 1
  end
end
return given
