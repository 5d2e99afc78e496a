-- remove: delete entries and everything stored about them.
--
-- KEYS[1] entries  hash  entry name -> definition JSON
-- KEYS[2] due      zset  entry name -> due instant (ms)
-- KEYS[3] declared set   names of the entries declared in code or config
-- KEYS[4] events   hash  entry name -> cluster event
-- ARGV[1] key tag; ARGV[2] changes channel
-- ARGV[3] sources allowed to be removed, comma separated ("code,config"), or "*"
-- ARGV[4..] entry names
--
-- Returns the names actually removed.
--
-- Touches per entry: <tag>:state|running|queued|started|history|checkpoint:<name>,
-- <tag>:owner:<owner>.

local entries, due = KEYS[1], KEYS[2]
local tag, channel, sources = ARGV[1], ARGV[2], ARGV[3]
local removed = {}

for i = 4, #ARGV do
  local name = ARGV[i]
  local definition = redis.call('HGET', entries, name)
  if definition then
    -- stored JSON may be garbage written by someone else: it can still be deleted
    local readable, entry = pcall(cjson.decode, definition)
    if not readable or type(entry) ~= 'table' then entry = {} end
    if sources == '*' or string.find(',' .. sources .. ',', ',' .. tostring(entry.source) .. ',', 1, true) then
      redis.call('HDEL', entries, name)
      redis.call('ZREM', due, name)
      redis.call('SREM', KEYS[3], name)
      redis.call('HDEL', KEYS[4], name)
      for _, kind in ipairs({'state', 'running', 'queued', 'started', 'history', 'checkpoint'}) do
        redis.call('DEL', tag .. ':' .. kind .. ':' .. name)
      end
      if type(entry.owner) == 'string' then
        redis.call('SREM', tag .. ':owner:' .. entry.owner, name)
      end
      redis.call('PUBLISH', channel, name)
      removed[#removed + 1] = name
    end
  end
end
return removed
