-- declare: record a beat's declaration set once, and give it its generation.
--
-- A declaration set is what one version of the code declares (entry names and their
-- definitions' digests), named by its digest. Its generation is when it was first
-- declared: a rolling deploy's new code is declared after the old, and an old pod
-- restarting mid-deploy brings a set declared before, so it is older. The first
-- beat to declare a set records its generation; every later one reads it. The key
-- expires when no beat has refreshed it (beat.lua) for its TTL.
--
-- KEYS[1] declaration  hash, TTL: gen (ms), names (JSON object: name -> entry digest)
-- KEYS[2] generation   string: the newest generation given out (ms), so that two sets
--                      first declared in one millisecond get two generations
-- ARGV[1] names JSON; ARGV[2] the generation this beat was given before ("" none: a
--         set lost from Redis while its beats lived keeps it); ARGV[3] TTL (ms)
--
-- Returns the set's generation. Writing repairs: a key of another type, or a
-- generation or names that are not what they should be, are written again.

local key, last_key = KEYS[1], KEYS[2]
local names, hint, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

if wrong_type(key, 'hash') then redis.call('DEL', key) end
local gen = tonumber(redis.call('HGET', key, 'gen'))
if not gen or gen <= 0 then
  if wrong_type(last_key, 'string') then redis.call('DEL', last_key) end
  local last = tonumber(redis.call('GET', last_key)) or 0
  gen = hint or math.max(clock_ms(''), last + 1)
  if gen > last then redis.call('SET', last_key, string.format('%d', gen)) end
  redis.call('HSET', key, 'gen', string.format('%d', gen))
end
if redis.call('HGET', key, 'names') ~= names then
  redis.call('HSET', key, 'names', names)
end
redis.call('PEXPIRE', key, ttl)
return gen
