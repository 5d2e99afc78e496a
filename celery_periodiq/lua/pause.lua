-- pause: stop or restart an entry's ticks without changing its definition.
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] due         zset  entry name -> due instant (ms)
-- KEYS[3] quarantine  hash  entry name -> why it is quarantined
-- ARGV[1] key tag; ARGV[2] changes channel; ARGV[3] entry name
-- ARGV[4] "pause" or "resume"
-- ARGV[5] pause: note text ("" for none); resume: nominal instant of the next tick (ms) or ""
-- ARGV[6] resume: due instant of the next tick (ms, jitter applied) or ""
--
-- Returns "ok", "missing" when there is no such entry, or "damaged: <reason>" when its
-- state key holds the wrong type (update or delete repairs it).
--
-- Touches: <tag>:state:<name> (paused, note, next, version).

local entries, due, quarantine = KEYS[1], KEYS[2], KEYS[3]
local tag, channel, name, action = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if redis.call('HEXISTS', entries, name) == 0 then return 'missing' end
local state = tag .. ':state:' .. name
local problem = damaged({state, 'hash'})
if problem then return 'damaged: ' .. problem end
redis.call('HINCRBY', state, 'version', 1)
if action == 'pause' then
  redis.call('HSET', state, 'paused', '1', 'note', ARGV[5])
  redis.call('ZREM', due, name)
else
  redis.call('HDEL', state, 'paused', 'note')
  redis.call('HSET', state, 'next', ARGV[5])
  if ARGV[5] ~= '' and redis.call('HEXISTS', quarantine, name) == 0 then
    redis.call('ZADD', due, ARGV[6], name)
  end
end
redis.call('PUBLISH', channel, name)
return 'ok'
