-- ack: settle claimed ticks of one partition after publishing, and schedule each
-- entry's next tick.
--
-- Only the beat that owns a claim may settle it; a claim taken over by another beat
-- is left alone. The next tick is written only if the entry still exists, is not
-- paused or quarantined, and has not been changed since the claim (a writer that
-- changed it already scheduled it). An entry whose history keys hold another type is
-- quarantined instead of written, and one whose state is not JSON gets a new state:
-- either way its claim is settled, so nothing is published twice, and no other entry
-- of the batch suffers.
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
--           pushed) and, last, its stats hash (the ticks' lateness, "l" fields)
-- ARGV[1] caller's beat id; ARGV[2] history length
-- ARGV[3..] one JSON object per tick:
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
--   late        for each tick published, ms from its due instant to its publishing
--   runs        how many ticks were published (added to the state's runs), or null
--
-- Returns the number of ticks settled.

local due, inflight, ticks, entries, states = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local quarantine = KEYS[6]
local alerts, stats = KEYS[#KEYS - 1], KEYS[#KEYS]
local me, keep = ARGV[1], tonumber(ARGV[2])

local now = clock_ms('')
local settled = 0

local function given(value)
  return value ~= nil and value ~= cjson.null
end

for i = 3, #ARGV do
  local a = cjson.decode(ARGV[i])
  local history, failures = KEYS[7 + (i - 3) * 2], KEYS[8 + (i - 3) * 2]
  local raw = redis.call('HGET', ticks, a.id)
  local mine = raw and decoded(raw).owner == me
  if mine and type(a.late) == 'table' then
    for _, ms in ipairs(a.late) do observe(stats, 'l', tonumber(ms) or 0) end
  end
  if mine then
    redis.call('ZREM', inflight, a.id)
    redis.call('HDEL', ticks, a.id)
    settled = settled + 1
  end
  -- A vanished entry gets no state back: deleting it must stay final. Its state left
  -- behind means the definition alone was deleted, outside periodiq: say so.
  local definition = redis.call('HGET', entries, a.name)
  local exists = definition ~= false
  if mine and not exists and redis.call('HEXISTS', states, a.name) == 1 then
    quarantine_entry(quarantine, a.name, 'its definition is missing (deleted outside periodiq?)',
      alerts, now)
  end
  if mine and exists then
    local problem = wrong_type(history, 'list') or wrong_type(failures, 'list')
    if problem == nil and given(a.quarantine) then problem = a.quarantine end
    if problem then
      quarantine_entry(quarantine, a.name, problem, alerts, now)
      redis.call('ZREM', due, a.name)
    else
      local state = load_state(states, a.name) or {version = a.version}
      local unchanged = (tonumber(state.version) or 0) == tonumber(a.version)
      local held = state.paused == '1' or redis.call('HEXISTS', quarantine, a.name) == 1
      if unchanged and not held then
        if given(a.next) then
          redis.call('ZADD', due, a.due, a.name)
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
        redis.call('ZREM', due, a.name)
      end
      if given(a.prev) then state.prev = a.prev end
      if a.counts then
        for reason, n in pairs(a.counts) do count(state, reason, n) end
        if a.counts.enqueued and not state.waiting_since then state.waiting_since = now end
      end
      if a.last then
        for field, value in pairs(a.last) do state[field] = value end
      end
      if given(a.queued) then state.queued = {a.queued[1], now + a.queued[2]} end
      local without = newly_overdue(state, now)
      if without then state.overdue = now end
      save_state(states, a.name, state)
      if a.events then
        for _, e in ipairs(a.events) do
          record(history, keep, e[1], now, e[2], e[3], '', e[5], '', e[4], '')
        end
      end
      if without then
        local note = 'no successful run for ' .. math.floor(without / 1000) .. ' s'
        record(history, keep, 'overdue', now, '', '-', '', note)
        push_alert(alerts, a.name, 'overdue', now, note)
      end
    end
  end
end
return settled
