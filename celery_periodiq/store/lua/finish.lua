-- finish: record how a run ended and, if it is final, clear its running marker.
--
-- A Celery retry is not final: the marker stays (stretched to cover the retry's
-- countdown) until the last attempt ends. A failed or timeboxed run is also kept in
-- the entry's failures list (the newest 5), so a long history of successes never
-- hides the last failures. Nothing is written for an entry whose history keys hold
-- another type: it is quarantined instead.
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] state       hash  entry name -> state JSON
-- KEYS[3] quarantine  hash  entry name -> why it is quarantined
-- KEYS[4] due         zset  entry name -> due instant
-- KEYS[5] history     list  the entry's history
-- KEYS[6] failures    list  the entry's newest failed or timeboxed runs
-- ARGV[1] task id
-- ARGV[2] tick (ms) or ""
-- ARGV[3] outcome: "succeeded", "failed", "timeboxed", "revoked", "expired" or "retrying"
-- ARGV[4] error text ("Type: message") or ""
-- ARGV[5] duration (ms)
-- ARGV[6] worker host
-- ARGV[7] history length
-- ARGV[8] "1" if final, "0" for a retry, "2" for a message that never ran (revoked or
--         expired in the queue, or refused after its begin): counted and recorded, the
--         last run's status untouched; it ends the run only when the running marker is
--         its own (a retry waiting, or the start its own begin wrote: ARGV[14]). A copy of
--         a tick whose run began (the marker is that run's, or the tick is among those
--         that began) changes nothing of that run: it is recorded as a "duplicate"
-- ARGV[9] marker TTL for a retry (ms), or 0
-- ARGV[10] now (ms) instead of the server clock, or ""
-- ARGV[11] entry name: nothing is written for an entry that no longer exists
-- ARGV[12] the task id as the history records it: "" when the tick derives it
-- KEYS[7] alerts     list  the partition's alert transitions, for a beat to send
-- KEYS[8] stats      hash  the partition's counters, summed ("n:<reason>")
-- KEYS[9] names       zset  every entry's name, each scored 0
-- KEYS[10] paused      set   the paused entries
-- KEYS[11] disabled    set   the disabled entries
-- KEYS[12] ended       set   the entries with no next tick
-- KEYS[13] overdue     zset  overdue entry -> since when (ms)
-- KEYS[14] failing     zset  failing entry -> since when (ms)
-- KEYS[15] running     zset  entry with a running marker -> until when (ms)
--   (the read side's indexes, kept as each state is saved: see _common.lua)
-- ARGV[13] the changes channel: told the entry's name when its alert state changed
-- ARGV[14] the attempt token of the delivery that ends, or "" (none: it never began); a
--          run that ends sends no begin again: its token is forgotten
-- KEYS[16] group       zset  the run's group's markers: task id -> until when (ms), under
--   the schedule's hash tag (an unused key of the partition when no limit applies)
-- ARGV[15] "1" if a group limit applies: a run that ends frees its slot (its marker in
--          KEYS[16]); a retry's marker is stretched to cover its countdown, as the running
--          marker is
-- KEYS[17] audit       hash  entry name -> its audit trail (see _common.lua)
-- KEYS[18] audit_newest  zset  entry name -> when its newest audit record was written (ms)
-- ARGV[16] the audit context (see _common.lua), or "" / absent: an entry quarantined here
--          is recorded as "quarantine", by this worker
--
-- A final run keeps the alert state: a success clears the failures in a row and, if the
-- entry was overdue or failing, records "recovered"; a failed or timeboxed run that
-- makes the failures in a row reach the entry's failure_threshold records "failing"
-- and, with pause_on_failure, pauses the entry with a note saying why.
--
-- Returns the outcome recorded: ARGV[3], or "duplicate" for a copy of a tick whose run
-- began; "" when nothing was written (the entry is gone, or quarantined here).

local entries, states, quarantine, due = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local history, failures = KEYS[5], KEYS[6]
local task_id, tick, outcome, err = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local duration, host, keep, kind = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]
local name, shown_id = ARGV[11], ARGV[12]

local now = clock_ms(ARGV[10])
if redis.call('HEXISTS', entries, name) == 0 then return '' end
local problem = wrong_type(history, 'list') or wrong_type(failures, 'list')
if problem then
  if quarantine_entry(quarantine, name, problem, KEYS[7], now) then
    audit_context(ARGV[16], KEYS[17], KEYS[18])
    audit(name, now, 'quarantine', problem)
  end
  redis.call('ZREM', due, name)
  return ''
end
keep_indexes(KEYS[8], 9)
local state = load_state(states, name) or {}
if err == '' then err = nil end
local holder = type(state.running) == 'table' and state.running[1] or nil
-- A message that never ran ends its run when the start is its own (its begin wrote it,
-- then it was refused) or its task id's marker has no attempt token (a retry waiting: the
-- marker written below); else, a copy of a tick whose run began changes nothing of it.
local ends_run = kind ~= '2' or started_by(state, ARGV[14] or '')
  or (holder == task_id and (state.running[3] or '') == '')
if not ends_run and (holder == task_id or tick_began(state, tonumber(tick))) then
  count(state, 'duplicate', 1)
  save_state(states, name, state)
  record(history, keep, 'duplicate', now, tick, shown_id, host,
    outcome .. ' in the queue: a copy of a run that began')
  return 'duplicate'
end
forget_token(state, ARGV[14] or '')
local grouped = ARGV[15] == '1'
if ends_run and kind ~= '0' then
  if grouped then redis.call('ZREM', KEYS[16], task_id) end
  if holder == task_id then state.running = nil end
  state.last_status, state.last_finished = outcome, now
  state.last_duration, state.last_error = tonumber(duration) or 0, err
elseif kind == '0' and holder == task_id then
  state.running = {task_id, now + tonumber(ARGV[9])}
  if grouped then
    redis.call('ZADD', KEYS[16], 'XX', now + tonumber(ARGV[9]), task_id)
    if redis.call('PTTL', KEYS[16]) < tonumber(ARGV[9]) then
      redis.call('PEXPIRE', KEYS[16], tonumber(ARGV[9]))
    end
  end
end
count(state, outcome, 1)
local change, note = nil, nil
if kind == '1' and outcome == 'succeeded' then
  state.last_ok, state.fails = now, nil
  if state.overdue or state.failing then
    change, note = 'recovered', 'a run succeeded'
    state.overdue, state.failing = nil, nil
  end
elseif kind == '1' and (outcome == 'failed' or outcome == 'timeboxed') then
  state.fails = (tonumber(state.fails) or 0) + 1
  local definition = decoded(redis.call('HGET', entries, name))
  local threshold = tonumber(definition.failure_threshold) or 3
  if not state.failing and state.fails >= threshold then
    state.failing = now
    change, note = 'failing', state.fails .. ' failed runs in a row' .. (err and (', the last: ' .. err) or '')
    if definition.pause_on_failure == true and state.paused ~= '1' then
      state.paused, state.note = '1', 'paused after ' .. note
      state.version = (tonumber(state.version) or 0) + 1
      redis.call('ZREM', due, name)
    end
  end
end
save_state(states, name, state)
-- a run that succeeded is told by its "started" event where it ran
local where = outcome == 'succeeded' and '' or host
local took = tonumber(duration) or ''
record(history, keep, outcome, now, tick, shown_id, where, '', took, '', err)
if outcome == 'failed' or outcome == 'timeboxed' then
  record(failures, 5, outcome, now, tick, shown_id, host, '', took, '', err)
end
if change then  -- after the run's own event: history reads newest first
  record(history, keep, change, now, '', '-', '', note)
  push_alert(KEYS[7], name, change, now, note)
  redis.call('PUBLISH', ARGV[13], name)  -- wakes the beats: one of them sends it
end
return outcome
