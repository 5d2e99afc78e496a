-- ack: settle claimed ticks of one partition after publishing, and schedule each
-- entry's next tick.
--
-- Only the beat that owns a claim may settle it; a claim taken over by another beat
-- is left alone. The next tick is written only if the entry still exists, is not
-- paused or quarantined, and has not been changed since the claim (a writer that
-- changed it already scheduled it). An entry whose history keys hold another type is
-- quarantined instead of written, and one whose state is not JSON gets a new state (a
-- state a worker's guard began afresh since the claim, with no version, is taken for
-- the claim's entry): either way its claim is settled, so nothing is published twice,
-- and no other entry of the batch suffers.
--
-- The ticks a claim published are added to the entry's "runs"; an entry whose
-- definition (as it is now) has a max_runs that many runs reach has ended: no next
-- tick, whatever a writer scheduled meanwhile.
--
-- KEYS[1] due         zset  entry name -> due instant (ms, jitter applied)
-- KEYS[2] inflight    zset  tick id -> recheck instant (ms)
-- KEYS[3] ticks       hash  tick id -> claim JSON
-- KEYS[4] entries     hash  entry name -> definition JSON
-- KEYS[5] state       hash  entry name -> state JSON
-- KEYS[6] quarantine  hash  entry name -> why it is quarantined
-- KEYS[7..] two per tick, in ARGV's order: its entry's history and failures lists;
--           then the partition's alerts list (an entry newly overdue or quarantined is
--           pushed), its stats hash (the ticks' lateness, "l" fields; the counters
--           summed, "n:<reason>") and, last, the read side's indexes kept from each
--           state saved (see _common.lua): names, paused, disabled, ended, overdue,
--           failing and running; then audit and audit_newest: the audit trails
-- ARGV[1] caller's beat id; ARGV[2] history length
-- ARGV[3] the audit context (see _common.lua), or "": an entry quarantined here is
--         recorded as "quarantine", by this beat
-- ARGV[4..] one JSON object per tick:
--   id          tick id from claim.lua
--   name        entry name
--   version     entry version seen at claim
--   next, due   nominal and jittered instants of the next tick (ms), or null when the schedule ended
--   counts      {reason = n} added to the entry's counters
--   events      list of events (see _common.lua) appended to history
--   last        {field = value} written to the state (last_enqueued, last_tick, ...)
--   queued      {task_id, ttl_ms} marks a published run that has not started, or null
--   quarantine  reason text: flag the entry as invalid and stop scheduling it, or null
--   prev        the newest tick this claim handled (ms): the next tick's tolerance counts from it
--   (a settlement written late (its beat frozen, or its ack failed and kept) writes no
--   older prev, last tick or queued marker over a newer claim's, and no queued marker
--   or waiting_since for a run that began already)
--   late        for each tick published, ms from its due instant to its publishing
--   runs        how many ticks were published (added to the state's runs), or null
--   owed        ticks the entry's next run stands for besides its own (folded), or null
--   inc         the entry's incarnation when claimed, or null: a settlement of an
--               incarnation deleted since settles its claim and changes nothing else
--
-- Returns {settled, refused}: the ticks settled (claims the caller owned), and those
-- refused because another beat took their claims over (it holds them, or its claim.lua
-- noted the handover from the caller in the entry's state and it settled them since).
-- A tick neither settled nor refused was settled already: by the caller's own earlier
-- call whose reply it did not get, or dropped with its deleted entry.

local due, inflight, ticks, entries, states = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local quarantine = KEYS[6]
local alerts, stats = KEYS[#KEYS - 10], KEYS[#KEYS - 9]
keep_indexes(stats, #KEYS - 8)
local me, keep = ARGV[1], tonumber(ARGV[2])
audit_context(ARGV[3], KEYS[#KEYS - 1], KEYS[#KEYS])

local now = clock_ms('')
local settled, refused = 0, 0
-- A claim is ours when its JSON (cjson's, as claim.lua wrote it) says so: found as text,
-- which costs less than decoding the claim (an owner inside another value would have
-- its quotes escaped, so it cannot match).
local owned_by = '"owner":' .. cjson.encode(me)

local function given(value)
  return value ~= nil and value ~= cjson.null
end

-- Everything the ticks need is read first, a command per key, and what they change in
-- the partition's keys is written last, a command per key: the state of an entry named
-- twice is read once and its changes stack; the due set keeps each name's last word.
local settlements, ids, names = {}, {}, {}
for i = 4, #ARGV do
  local a = cjson.decode(ARGV[i])
  settlements[#settlements + 1] = a
  ids[#ids + 1] = a.id
  names[#names + 1] = a.name
end
local claims = chunked('HMGET', ticks, ids)
local definitions = chunked('HMGET', entries, names)
local stored = chunked('HMGET', states, names)
local held_names = chunked('HMGET', quarantine, names)
local loaded, held, seen = {}, {}, {}
local was_next, was_overdue, unknown, sums = {}, {}, {}, {}
for k, name in ipairs(names) do
  if held[name] == nil then held[name] = held_names[k] ~= false end
end
local function quarantine_here(name, problem)
  if quarantine_entry(quarantine, name, problem, alerts, now) then
    audit(name, now, 'quarantine', problem)
  end
  held[name] = true
end
local changed, next_due, lateness, done = {}, {}, {}, {}

for k, a in ipairs(settlements) do
  local history, failures = KEYS[5 + k * 2], KEYS[6 + k * 2]
  local first = not seen[a.id]
  local raw = first and claims[k]
  seen[a.id] = true
  local mine = raw and string.find(raw, owned_by, 1, true) ~= nil
  if raw and not mine then
    refused = refused + 1 -- another beat holds it
  elseif first and not raw and stored[k]
      and string.find(stored[k], '"handover":' .. cjson.encode({a.id, me}), 1, true) then
    refused = refused + 1 -- taken over from the caller, and settled since
  end
  if mine and type(a.late) == 'table' then
    for _, ms in ipairs(a.late) do
      ms = math.max(tonumber(ms) or 0, 0)
      local index = 'l' .. bucket(ms)
      lateness[index] = (lateness[index] or 0) + 1
      lateness.lsum = (lateness.lsum or 0) + ms
    end
  end
  if mine then
    done[#done + 1] = a.id
    settled = settled + 1
  end
  -- A vanished entry gets no state back: deleting it must stay final. Its state left
  -- behind means the definition alone was deleted, outside periodiq: say so.
  local definition = definitions[k]
  local exists = definition ~= false
  if mine and not exists and redis.call('HEXISTS', states, a.name) == 1 then
    quarantine_here(a.name, 'its definition is missing (deleted outside periodiq?)')
    index_named(a.name, states)
  end
  if mine and exists then
    -- the history's type is told by the first event's LPUSH (below) where there is one
    local events = type(a.events) == 'table' and a.events or {}
    local problem = wrong_type(failures, 'list')
    if problem or #events == 0 then problem = wrong_type(history, 'list') or problem end
    if problem == nil and given(a.quarantine) then problem = a.quarantine end
    local state
    if problem then
      quarantine_here(a.name, problem)
      next_due[a.name] = false
    else
      state = loaded[a.name]
      if state == nil then
        state = parse_state(stored[k])
        -- what the indexes hold of it: ack.lua changes only its counters, whether it
        -- has a next tick and whether it is overdue (kept as values: no table a tick)
        if state then
          was_next[a.name], was_overdue[a.name] = state.next, tonumber(state.overdue) or false
        elseif stored[k] then
          unknown[a.name] = true
        end
        -- a state with no version was begun afresh by a worker's guard after it was
        -- lost (begin.lua): it is the claim's entry, as a missing state is
        if state and state.version == nil then
          state.version, state.inc = a.version, state.inc or (given(a.inc) and a.inc or nil)
        end
        state = state or {version = a.version, inc = given(a.inc) and a.inc or nil}
        loaded[a.name] = state
      end
      if given(a.inc) and state.inc ~= a.inc then
        -- a claim of an incarnation deleted since: the entry of that name now is another
        state = nil
      end
      if #events > 0 then
        -- the first event is written before anything else of the settlement: a history
        -- key of another type refuses it, and the entry is quarantined as above
        local written, err = true, nil
        if state then
          local e = events[1]
          written, err = pcall(record, history, keep, e[1], now, e[2], e[3], '', e[5], '',
            e[4], '')
        end
        if not written then
          problem = wrong_type(history, 'list')
          if not problem then error(err) end
        elseif not state then  -- nothing written: its type asked, as for every settlement
          problem = wrong_type(history, 'list')
        end
        if problem then
          quarantine_here(a.name, problem)
          next_due[a.name] = false
          state = nil
        end
      end
    end
    if problem or not state then
      -- nothing more of this settlement applies
    else
      local unchanged = (tonumber(state.version) or 0) == tonumber(a.version)
      local paused = state.paused == '1' or held[a.name]
      if unchanged and not paused then
        if given(a.next) then
          next_due[a.name] = a.due
          state.next = a.next
        else
          state.next = ''
        end
      end
      if state.claim == a.id then state.claim = nil end
      if given(a.runs) then state.runs = (tonumber(state.runs) or 0) + a.runs end
      local limit = string.find(definition, '"max_runs":', 1, true)
        and tonumber(decoded(definition).max_runs)
      if limit and (tonumber(state.runs) or 0) >= limit then
        state.next = ''
        next_due[a.name] = false
      end
      if given(a.prev) and (tonumber(state.prev) or a.prev) <= a.prev then state.prev = a.prev end
      if unchanged then state.owed = (tonumber(a.owed) or 0) > 0 and a.owed or nil end
      -- written late, after the run of the tick it published began: nothing waits
      local began = a.last and tick_began(state, tonumber(a.last.last_tick))
      if a.counts then
        for reason, n in pairs(a.counts) do
          count(state, reason, n)
          if not unknown[a.name] then sums[reason] = (sums[reason] or 0) + whole(n) end
        end
        if a.counts.enqueued and not state.waiting_since and not began then
          state.waiting_since = now
        end
      end
      local older = a.last and (tonumber(a.last.last_tick) or 0) < (tonumber(state.last_tick) or 0)
      if a.last and not older then
        for field, value in pairs(a.last) do state[field] = value end
      end
      if given(a.queued) and not older and not began then
        state.queued = {a.queued[1], now + a.queued[2]}
      end
      local without = newly_overdue(state, now)
      if without then state.overdue = now end
      changed[a.name] = state
      for index = 2, #events do
        local e = events[index]
        record(history, keep, e[1], now, e[2], e[3], '', e[5], '', e[4], '')
      end
      if without then
        local note = 'no successful run for ' .. math.floor(without / 1000) .. ' s'
        record(history, keep, 'overdue', now, '', '-', '', note)
        push_alert(alerts, a.name, 'overdue', now, note)
      end
    end
  end
end

if #done > 0 then
  chunked('ZREM', inflight, done)
  chunked('HDEL', ticks, done)
end
local writes, scheduled, dropped = {}, {}, {}
for name, state in pairs(changed) do
  writes[#writes + 1] = name
  writes[#writes + 1] = cjson.encode(state)
end
for name, at in pairs(next_due) do
  if at then
    scheduled[#scheduled + 1] = at
    scheduled[#scheduled + 1] = name
  else
    dropped[#dropped + 1] = name
  end
end
chunked('HSET', states, writes)
for name, state in pairs(changed) do
  if unknown[name] then
    index_facts(name, UNKNOWN, facts(state), sums)
  else
    local ended, overdue = state.next == '', tonumber(state.overdue) or false
    if ended ~= (was_next[name] == '') then
      redis.pcall(ended and 'SADD' or 'SREM', IDX.ended, name)
    end
    if overdue ~= (was_overdue[name] or false) then
      if overdue then redis.pcall('ZADD', IDX.overdue, overdue, name)
      else redis.pcall('ZREM', IDX.overdue, name) end
    end
  end
end
for reason, n in pairs(sums) do
  if n ~= 0 then redis.pcall('HINCRBY', stats, 'n:' .. reason, n) end
end
chunked('ZADD', due, scheduled)
chunked('ZREM', due, dropped)
for field, n in pairs(lateness) do redis.call('HINCRBY', stats, field, n) end
return {settled, refused}
