-- remove: delete entries and everything stored about them.
--
-- Works on damaged entries too: keys of any type are deleted, a definition that
-- is garbage is deleted, and a name whose definition vanished outside periodiq
-- but whose other keys were left behind is cleaned up (and counts as removed).
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] due         zset  entry name -> due instant (ms)
-- KEYS[3] declared    set   names of the entries declared in code or config
-- KEYS[4] events      hash  entry name -> cluster event
-- KEYS[5] quarantine  hash  entry name -> why it is quarantined
-- ARGV[1] key tag; ARGV[2] changes channel
-- ARGV[3] sources allowed to be removed, comma separated ("code,config"), or "*"
-- ARGV[4..] entry names
--
-- Returns the names actually removed.
--
-- Touches per entry: <tag>:state|running|queued|started|history|checkpoint:<name>,
-- <tag>:owner:<owner>.

local entries, due, declared, events, quarantine = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local tag, channel, sources = ARGV[1], ARGV[2], ARGV[3]
local removed = {}

local function leftovers(name, keys)
  if redis.call('ZSCORE', due, name) or redis.call('HEXISTS', quarantine, name) == 1 then
    return true
  end
  for k = 1, #keys, 2 do
    if redis.call('EXISTS', keys[k]) == 1 then return true end
  end
  return false
end

for i = 4, #ARGV do
  local name = ARGV[i]
  local keys = entry_keys(tag, name)
  local definition = redis.call('HGET', entries, name)
  local entry = definition and decoded(definition) or {}
  local allowed = sources == '*'
    or string.find(',' .. sources .. ',', ',' .. tostring(entry.source) .. ',', 1, true)
  if (definition and allowed) or (not definition and sources == '*' and leftovers(name, keys)) then
    redis.call('HDEL', entries, name)
    redis.call('ZREM', due, name)
    redis.call('SREM', declared, name)
    redis.call('HDEL', events, name)
    redis.call('HDEL', quarantine, name)
    for k = 1, #keys, 2 do redis.call('DEL', keys[k]) end
    if type(entry.owner) == 'string' then
      redis.call('SREM', usable_set(tag .. ':owner:' .. entry.owner), name)
    end
    redis.call('PUBLISH', channel, name)
    removed[#removed + 1] = name
  end
end
return removed
