-- _common: helpers prepended to every script by scripts.py; never loaded on its own.

-- The server clock in ms and the microseconds past it, or the caller's override
-- (tests inject a clock as an ARGV; "" means none).
local function clock_ms(override)
  if override and override ~= '' then return tonumber(override), 0 end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[2]) % 1000
end

-- Every key of one entry with the type periodiq keeps in it.
local function entry_keys(tag, name)
  return {
    tag .. ':state:' .. name, 'hash',
    tag .. ':running:' .. name, 'string',
    tag .. ':queued:' .. name, 'string',
    tag .. ':started:' .. name, 'zset',
    tag .. ':history:' .. name, 'stream',
    tag .. ':checkpoint:' .. name, 'string',
  }
end

-- Why an entry's keys cannot be used, or nil: a key holding another type than
-- periodiq keeps there was written by someone else. `expected` is {key, type, ...}.
local function damaged(expected)
  for i = 1, #expected, 2 do
    local found = redis.call('TYPE', expected[i])['ok']
    if found ~= 'none' and found ~= expected[i + 1] then
      return 'key ' .. expected[i] .. ' holds a ' .. found .. ', not a ' .. expected[i + 1]
    end
  end
  return nil
end

-- Delete the keys of `expected` that hold the wrong type, so they can be written afresh.
local function repair(expected)
  for i = 1, #expected, 2 do
    local found = redis.call('TYPE', expected[i])['ok']
    if found ~= 'none' and found ~= expected[i + 1] then redis.call('DEL', expected[i]) end
  end
end

-- Stored JSON may be garbage written by someone else: read it defensively.
local function decoded(text)
  local readable, value = pcall(cjson.decode, text)
  if readable and type(value) == 'table' then return value end
  return {}
end

-- A set key that can take SADD/SREM: replaced when something else holds its name.
local function usable_set(key)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= 'set' then redis.call('DEL', key) end
  return key
end

