-- remove: delete entries of one partition and everything stored about them.
--
-- Works on damaged entries too: a definition or state that is garbage is deleted,
-- keys of any type are deleted, and a name whose definition vanished outside
-- periodiq but whose state or other keys were left behind is cleaned up (and counts
-- as removed).
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] due         zset  entry name -> due instant (ms)
-- KEYS[3] declared    set   names of the entries declared in code or config
-- KEYS[4] events      hash  entry name -> cluster event
-- KEYS[5] quarantine  hash  entry name -> why it is quarantined
-- KEYS[6] state       hash  entry name -> state JSON
-- KEYS[7] generations zset  generation -> when its last beat's heartbeat runs out (ms)
-- KEYS[8..] five per entry, in ARGV's order: its owner set (as the caller read it),
--           its history, failures, checkpoint and backfilled keys; then the partition's
--           stats hash (the counters summed, "n:<reason>": a removed entry's are taken
--           off) and the read side's indexes (see _common.lua): names, paused, disabled,
--           ended, overdue, failing and running; then changed: the partition's change log
--           (zset name -> ms: an entry removed is noted); last, audit and audit_newest: the
--           audit trails (see _common.lua)
-- ARGV[1] changes channel
-- ARGV[2] sources allowed to be removed, comma separated ("code,config"), or "*"; all
--         but "*" (an admin's delete) keep an entry while a beat of the generation
--         of declarations that wrote it lives: that beat declares it
-- ARGV[3] the audit context (see _common.lua): each entry removed is recorded as "delete"
-- ARGV[4..] two per entry: its name, and the owner the caller read ("" for none)
--
-- Returns the names actually removed, "retry:<name>" for an entry whose owner changed
-- since the caller read it (nothing of it removed: read again, call again), and
-- "kept:<name>" for one kept for a live beat of the generation that wrote it.

local entries, due, declared, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local quarantine, states, generations = KEYS[5], KEYS[6], KEYS[7]
local channel, sources = ARGV[1], ARGV[2]
keep_indexes(KEYS[#KEYS - 10], #KEYS - 9)
local change_log = KEYS[#KEYS - 2]
local out = {}
local now = clock_ms('')
audit_context(ARGV[3], KEYS[#KEYS - 1], KEYS[#KEYS])

-- Whether a beat of the generation that wrote the entry still lives.
local function writer_lives(name)
  local gen = tonumber(decoded(redis.call('HGET', states, name) or '').gen)
  if not gen then return false end
  local until_ms = tonumber(redis.call('ZSCORE', generations, string.format('%d', gen)))
  return until_ms ~= nil and until_ms > now
end

local function left_behind(name, own)
  if redis.call('ZSCORE', due, name) or redis.call('HEXISTS', quarantine, name) == 1
      or redis.call('HEXISTS', states, name) == 1 then
    return true
  end
  return redis.call('EXISTS', own[2], own[3], own[4], own[5]) > 0
end

for i = 4, #ARGV, 2 do
  local name, was_owner = ARGV[i], ARGV[i + 1]
  local base = 7 + (i - 4) / 2 * 5
  local own = {KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4], KEYS[base + 5]}
  local definition = redis.call('HGET', entries, name)
  local entry = definition and decoded(definition) or {}
  local owner = type(entry.owner) == 'string' and entry.owner or ''
  local allowed = sources == '*'
    or string.find(',' .. sources .. ',', ',' .. tostring(entry.source) .. ',', 1, true)
  if definition and owner ~= was_owner then
    out[#out + 1] = 'retry:' .. name
  elseif definition and allowed and sources ~= '*' and writer_lives(name) then
    out[#out + 1] = 'kept:' .. name
  elseif (definition and allowed) or (not definition and sources == '*' and left_behind(name, own)) then
    -- what its state counted leaves the indexes with it (while its name is indexed: a
    -- state left behind by a definition deleted outside periodiq may count nothing)
    local raw = redis.call('HGET', states, name)
    local state = raw and type(redis.pcall('ZSCORE', IDX.names, name)) == 'string'
      and parse_state(raw)
    index_facts(name, state and facts(state) or UNKNOWN, nil)
    redis.call('HDEL', entries, name)
    redis.call('HDEL', states, name)
    redis.call('ZREM', due, name)
    redis.call('SREM', declared, name)
    redis.call('HDEL', events, name)
    redis.call('HDEL', quarantine, name)
    redis.call('DEL', own[2], own[3], own[4], own[5])
    if owner ~= '' then redis.call('SREM', usable_set(own[1]), name) end
    note_change(change_log, name, now)
    audit(name, now, 'delete')
    redis.call('PUBLISH', channel, name)
    out[#out + 1] = name
  end
end
return out
