-- claim: take due ticks of one partition, atomically, for one beat instance.
--
-- A due entry is moved out of the due set and into the in-flight set, so no
-- other beat can claim the same tick. A tick stays in flight until the beat
-- acknowledges it (ack.lua). A tick whose lease ran out while its owner's
-- heartbeat is gone (a dead beat) is handed to the caller unchanged, so it is
-- published again with the same task id. "Now" is this server's clock.
--
-- One entry's damage never stops the others: an entry whose definition vanished is
-- reported (and listed as quarantined), and an entry whose state is missing or not
-- JSON is claimed with its due instant standing in for the tick and flagged "rebuilt",
-- for the beat to check against the schedule.
--
-- KEYS[1] due         zset  entry name -> due instant (ms, jitter applied)
-- KEYS[2] inflight    zset  tick id -> when to look at the claim again (ms)
-- KEYS[3] ticks       hash  tick id -> claim JSON
-- KEYS[4] entries     hash  entry name -> definition JSON
-- KEYS[5] state       hash  entry name -> state JSON (read: next, version, prev, top,
--                           runs, markers; written for a limited entry: claim; for a claim
--                           taken over from another beat: handover)
-- KEYS[6] quarantine  hash  entry name -> why it is quarantined
-- KEYS[7] alive       zset  beat id -> heartbeat expiry (ms)
-- KEYS[8] alerts      list  alert transitions (an entry newly quarantined is pushed)
-- KEYS[9] stats       hash  the partition's counters, summed ("n:<reason>")
-- KEYS[10] names       zset  every entry's name, each scored 0
-- KEYS[11] paused      set   the paused entries
-- KEYS[12] disabled    set   the disabled entries
-- KEYS[13] ended       set   the entries with no next tick
-- KEYS[14] overdue     zset  overdue entry -> since when (ms)
-- KEYS[15] failing     zset  failing entry -> since when (ms)
-- KEYS[16] running     zset  entry with a running marker -> until when (ms)
--   (the read side's indexes, used when a vanished definition's
--   state is quarantined: see _common.lua)
-- KEYS[17] pauses      zset  entry paused until an instant -> that instant (ms)
-- KEYS[18] audit       hash  entry name -> its audit trail (see _common.lua)
-- KEYS[19] audit_newest  zset  entry name -> when its newest audit record was written (ms)
-- ARGV[1] caller's beat id
-- ARGV[2] most ticks to return
-- ARGV[3] lease (ms)
-- ARGV[4] now (ms) to use instead of the server clock, or "" (tests inject a clock here)
-- ARGV[5] horizon (ms): also claim ticks due this soon, so the caller can publish them
--         the moment they are due instead of starting its round trip then
-- ARGV[6] the audit context (see _common.lua), or "": an entry quarantined here (its
--         definition vanished) is recorded as "quarantine", by this beat
--
-- Returns {now_ms, next_due_ms or -1, next_recheck_ms or -1, now_us (0-999, the clock's
-- microseconds past now_ms), notices, id1, claim1, definition1, id2, ...}
-- where notices is "" or JSON {"vanished": [name, ...], "ended": [name, ...]} (ended:
-- timed pauses whose end came (within the horizon), for the caller to resume: each is
-- listed again a lease later until resumed (pause.lua), so a beat that dies first leaves
-- it to another; a pause's end also counts as the partition's next due instant),
-- claim is JSON {name, nominal, due, claimed, owner, running, queued, version, prev,
-- runs, taken, rebuilt, owed, inc} (nominal: the tick before jitter, ms; prev: the
-- entry's previous tick, ms, or -1: the newest its settlements wrote, or the newest that
-- began if later (an entry written while a settlement of it is pending is due again
-- before that settlement writes its tick); runs: ticks published for it so far;
-- taken counts takeovers; rebuilt: the state had no readable next tick and the due
-- instant stands in for it; owed: ticks folded into the entry's next run; inc: the
-- entry's incarnation, which a delete ends: a claim of an incarnation that is gone
-- is dropped, not handed out)
--
-- A claim taken over from another beat is noted in its entry's state, as handover =
-- [tick id, that beat's id]: that beat's late settlement of it, once this one settled
-- it, is then told "taken over" (ack.lua), not "settled already".
--
-- An entry with max_runs has at most one unsettled claim: its state names it ("claim"),
-- and while that claim is in flight a new tick of the entry (scheduled by a writer
-- meanwhile) waits, so no claim is planned on a count of runs that is out of date.
-- and definition is the entry JSON, or "" when the entry has vanished.

local due, inflight, ticks, entries, states = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local quarantine, alive = KEYS[6], KEYS[7]
local me, batch, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

-- How long a limited entry's tick waits for the entry's unsettled claim (ms).
local WAIT_FOR_CLAIM = 1000

local now, micros = clock_ms(ARGV[4])
local horizon = tonumber(ARGV[5] or '0') or 0
audit_context(ARGV[6], KEYS[18], KEYS[19])
local out = {now, -1, -1, micros, ''}
local taken = 0
local vanished = {}

-- Whether a claim's entry was deleted since (and maybe created again: its state names
-- another incarnation). A state lost meanwhile (gone or not JSON, or begun afresh by a
-- worker's guard, with no incarnation) while the definition stays is the same entry:
-- its claim is taken over as any other, and its settlement rebuilds the state.
local function another_incarnation(claim)
  local state = parse_state(redis.call('HGET', states, claim.name))
  if state and type(state.inc) == 'string' then return state.inc ~= claim.inc end
  return redis.call('HEXISTS', entries, claim.name) == 0
end

-- 1. Claims whose lease ran out: keep them with a live owner, take the rest.
local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, batch)
for _, id in ipairs(expired) do
  local raw = redis.call('HGET', ticks, id)
  local claim = raw and decoded(raw)
  if not claim or type(claim.name) ~= 'string' then
    redis.call('ZREM', inflight, id)
    redis.call('HDEL', ticks, id)
  elseif type(claim.inc) == 'string' and another_incarnation(claim) then
    -- the entry was deleted (and maybe created again) since: nothing of this claim applies
    redis.call('ZREM', inflight, id)
    redis.call('HDEL', ticks, id)
  else
    local owned = type(claim.owner) == 'string' and redis.call('ZSCORE', alive, claim.owner)
    if claim.owner ~= me and owned and tonumber(owned) > now then
      -- look again the moment the owner's heartbeat would run out
      redis.call('ZADD', inflight, tonumber(owned), id)
    else
      local stored = type(claim.owner) == 'string' and claim.owner ~= me
        and redis.call('HGET', states, claim.name)
      local state = stored and parse_state(stored)
      if state then
        state.handover = {id, claim.owner}
        redis.call('HSET', states, claim.name, cjson.encode(state))
      end
      claim.owner = me
      claim.taken = (tonumber(claim.taken) or 0) + 1
      raw = cjson.encode(claim)
      redis.call('HSET', ticks, id, raw)
      redis.call('ZADD', inflight, now + lease, id)
      out[#out + 1] = id
      out[#out + 1] = raw
      out[#out + 1] = redis.call('HGET', entries, claim.name) or ''
      taken = taken + 1
    end
  end
end

-- 2. Due entries, oldest first: their definitions and states read, and their claims
-- written, a command for all of them each.
if taken < batch then
  local found = redis.call('ZRANGEBYSCORE', due, '-inf', now + horizon, 'WITHSCORES',
    'LIMIT', 0, batch - taken)
  local names = {}
  for index = 1, #found, 2 do names[#names + 1] = found[index] end
  local definitions, stored = {}, {}
  if #names > 0 then
    chunked('ZREM', due, names)
    definitions = chunked('HMGET', entries, names)
    stored = chunked('HMGET', states, names)
  end
  local written, leases = {}, {}
  for k, name in ipairs(names) do
    local due_at, definition = tonumber(found[k * 2]), definitions[k]
    if not definition then
      vanished[#vanished + 1] = name
      local problem = 'its definition is missing (deleted outside periodiq?)'
      if quarantine_entry(quarantine, name, problem, KEYS[8], now) then
        audit(name, now, 'quarantine', problem)
      end
      keep_indexes(KEYS[9], 10)
      index_named(name, states)
    else
      local state, unreadable = parse_state(stored[k])
      state = state or {}
      local nominal = tonumber(state.next)
      local rebuilt = nominal == nil
      if rebuilt then nominal = due_at end
      local id = name .. '@' .. string.format('%d', nominal)
      local limited = string.find(definition, '"max_runs":', 1, true) ~= nil
      local pending = limited and type(state.claim) == 'string' and state.claim ~= id
        and redis.call('HEXISTS', ticks, state.claim) == 1
      if pending then
        redis.call('ZADD', due, math.max(due_at, now + WAIT_FOR_CLAIM), name)
      else
        if limited and not unreadable then
          state.claim = id
          save_state(states, name, state)
        end
        -- the previous tick: see "prev" above
        local prev, top = tonumber(state.prev) or -1, tonumber(state.top)
        if top and top > prev and top < nominal then prev = top end
        local claim = cjson.encode({
          name = name,
          nominal = nominal,
          due = due_at,
          claimed = now,
          owner = me,
          running = holds(state.running, now),
          queued = holds(state.queued, now),
          version = tonumber(state.version) or 0,
          prev = prev,
          runs = tonumber(state.runs) or 0,
          taken = 0,
          rebuilt = rebuilt,
          owed = tonumber(state.owed),
          inc = type(state.inc) == 'string' and state.inc or nil,
        })
        written[#written + 1] = id
        written[#written + 1] = claim
        leases[#leases + 1] = now + lease
        leases[#leases + 1] = id
        out[#out + 1] = id
        out[#out + 1] = claim
        out[#out + 1] = definition
      end
    end
  end
  if #written > 0 then
    chunked('HSET', ticks, written)
    chunked('ZADD', inflight, leases)
  end
end

-- 3. Timed pauses whose end came: listed for the caller to resume. A pauses key of
-- another type (written by something else) ends none, and stops no tick: doctor names
-- it, and index.lua (doctor --reindex) builds it afresh.
local pauses = wrong_type(KEYS[17], 'zset') and '' or KEYS[17]
local ended = pauses ~= ''
  and redis.call('ZRANGEBYSCORE', pauses, '-inf', now + horizon, 'LIMIT', 0, batch) or {}
for _, name in ipairs(ended) do redis.call('ZADD', pauses, now + lease, name) end

if #vanished > 0 or #ended > 0 then
  out[5] = cjson.encode({vanished = #vanished > 0 and vanished or nil,
    ended = #ended > 0 and ended or nil})
end
local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
if first[2] then out[2] = tonumber(first[2]) end
local resumes = pauses ~= '' and redis.call('ZRANGE', pauses, 0, 0, 'WITHSCORES') or {}
if resumes[2] and (out[2] < 0 or tonumber(resumes[2]) < out[2]) then
  out[2] = tonumber(resumes[2])
end
local recheck = redis.call('ZRANGE', inflight, 0, 0, 'WITHSCORES')
if recheck[2] then out[3] = tonumber(recheck[2]) end
return out
