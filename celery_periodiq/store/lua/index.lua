-- index: build the read side's indexes of one partition afresh from its entries and
-- their states, the audit trails' index and the timed pauses' index: for a schedule
-- written before the scripts kept them, and for doctor's repair of indexes that drifted
-- (damaged, or written by an older version beside).
--
-- Atomic, so it blocks the partition's server while it reads every entry of the
-- partition (about 1 s per 100,000 entries; a schedule's entries are spread over its
-- partitions). The counters summed ("n:<reason>" in stats) are summed afresh; the
-- histograms are left alone. An entry whose state is not JSON counts nothing.
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] state       hash  entry name -> state JSON
-- KEYS[3] quarantine  hash  entry name -> why it is quarantined
-- KEYS[4] stats       hash  the counters summed; "idx" says which indexes were built
-- KEYS[5] names       zset  every entry's name, each scored 0
-- KEYS[6] paused      set   the paused entries
-- KEYS[7] disabled    set   the disabled entries
-- KEYS[8] ended       set   the entries with no next tick
-- KEYS[9] overdue     zset  overdue entry -> since when (ms)
-- KEYS[10] failing    zset  failing entry -> since when (ms)
-- KEYS[11] running    zset  entry with a running marker -> until when (ms)
-- KEYS[12] audit         hash  entry name -> its audit trail (see _common.lua)
-- KEYS[13] audit_newest  zset  entry name -> when its newest audit record was written
--                              (ms): each trail's is written afresh (a trail kept by an
--                              older version was not indexed unless deleted; one whose
--                              newest cannot be read scores 0, dropped at the next record)
-- KEYS[14] pauses     zset  entry paused until an instant -> that instant (ms): an entry
--                           whose state says it is paused until an instant is added when
--                           missing (a beat would never end its pause); a name already
--                           there keeps its score (a beat may be ending it, claim.lua)
-- KEYS[15] due        zset  entry name -> due instant (ms)
-- KEYS[16] ticks      hash  tick id (name@nominal) -> claim JSON: the ticks in flight
-- KEYS[17] inflight   zset  tick id -> when a beat looks at it again (ms)
-- ARGV[1] the version of the indexes, written to stats' "idx" field (INDEX_VERSION)
--
-- It repairs what stops a partition's ticks: a due set, ticks or in-flight set of another
-- type is deleted (every claim there failed), and a tick in flight that the in-flight set
-- lacks (no beat would look at it again) is put back in it, to be looked at at once (its
-- owner, alive, keeps it: claim.lua). It also schedules again each entry no beat would
-- ever run: enabled, clock-driven, not
-- quarantined, paused or ended, yet neither due nor in flight (every script keeps an
-- entry in one or the other; damaged data, a write from outside periodiq or a bug can
-- leave it in neither). It is due at its next tick (jitter left out), or now when its
-- state has none (the beat then rebuilds the state from the definition).
--
-- Returns {entries indexed, then the names of the entries scheduled again}.

local entries, states, quarantine, stats = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
keep_indexes(stats, 5)
clear_indexes()

local names, seen = {}, {}
for _, key in ipairs({entries, quarantine}) do
  if not wrong_type(key, 'hash') then
    for _, name in ipairs(redis.call('HKEYS', key)) do
      if not seen[name] then
        seen[name] = true
        names[#names + 1] = name
      end
    end
  end
end

local pauses, due, ticks, inflight = KEYS[14], KEYS[15], KEYS[16], KEYS[17]
local now = clock_ms('')
for key, kind in pairs({[pauses] = 'zset', [due] = 'zset', [ticks] = 'hash', [inflight] = 'zset'}) do
  if wrong_type(key, kind) then redis.call('DEL', key) end
end
local flying, quarantined, watched = {}, {}, {}
local ids = redis.call('HKEYS', ticks)
for _, id in ipairs(ids) do
  flying[string.match(id, '^(.*)@%-?%d+$') or id] = true
  watched[#watched + 1] = 0
  watched[#watched + 1] = id
end
for first = 1, #watched, 1000 do
  redis.call('ZADD', inflight, 'NX', unpack(watched, first, math.min(first + 999, #watched)))
end
if not wrong_type(quarantine, 'hash') then
  for _, name in ipairs(redis.call('HKEYS', quarantine)) do quarantined[name] = true end
end

-- Whether an entry neither due nor in flight should be due: when at (ms), or nil.
local function stranded(name, definition, state, unreadable, now)
  if flying[name] or quarantined[name] or not definition then return nil end
  local parsed = decoded(definition)
  local spec = type(parsed.schedule) == 'string' and string.lower(parsed.schedule) or ''
  spec = string.match(spec, '^%s*(.-)%s*$')
  if parsed.enabled == false or spec == '@reboot' or spec == '@shutdown' then return nil end
  if unreadable then return now end
  if state.paused == '1' or state.next == '' then return nil end
  return tonumber(state.next) or now
end

local sums, named, disabled, rescheduled, scheduled = {}, {}, {}, {}, {}
for first = 1, #names, 1000 do
  local group = {unpack(names, first, math.min(first + 999, #names))}
  local definitions = redis.call('HMGET', entries, unpack(group))
  local stored = redis.call('HMGET', states, unpack(group))
  local scores = redis.call('ZMSCORE', due, unpack(group))
  for k, name in ipairs(group) do
    if not scores[k] then
      local state, unreadable = parse_state(stored[k])
      local at = stranded(name, definitions[k], state, unreadable, now)
      if at then
        scheduled[#scheduled + 1] = at
        scheduled[#scheduled + 1] = name
        rescheduled[#rescheduled + 1] = name
      end
    end
    named[#named + 1] = 0
    named[#named + 1] = name
    local definition = definitions[k]
    if definition and string.find(definition, '"enabled":false', 1, true)
        and decoded(definition).enabled == false then
      disabled[#disabled + 1] = name
    end
    local state = stored[k] and parse_state(stored[k])
    if state then
      index_facts(name, nil, facts(state), sums)
      local ends = state.paused == '1' and tonumber(state['until'])
      if ends then redis.call('ZADD', pauses, 'NX', ends, name) end
    end
  end
end
if #named > 0 then chunked('ZADD', IDX.names, named) end
if #scheduled > 0 then chunked('ZADD', due, scheduled) end
if #disabled > 0 then chunked('SADD', IDX.disabled, disabled) end
for reason, n in pairs(sums) do
  if n ~= 0 then redis.call('HINCRBY', stats, 'n:' .. reason, n) end
end
redis.call('HSET', stats, 'idx', ARGV[1])

local audit, audit_newest = KEYS[12], KEYS[13]
if not wrong_type(audit, 'hash') then
  if wrong_type(audit_newest, 'zset') then redis.call('DEL', audit_newest) end
  local trails, scored = redis.call('HKEYS', audit), {}
  for first = 1, #trails, 1000 do
    local group = {unpack(trails, first, math.min(first + 999, #trails))}
    for k, text in ipairs(redis.call('HMGET', audit, unpack(group))) do
      scored[#scored + 1] = tonumber(string.match(text or '', '^%[(%d+)')) or 0
      scored[#scored + 1] = group[k]
    end
  end
  if #scored > 0 then chunked('ZADD', audit_newest, scored) end
end
local out = {#names}
for _, name in ipairs(rescheduled) do out[#out + 1] = name end
return out
