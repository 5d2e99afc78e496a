-- pause: stop or restart an entry's ticks without changing its definition.
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] due         zset  entry name -> due instant (ms)
-- KEYS[3] state       hash  entry name -> state JSON (paused, note, next, version; read:
--                           runs)
-- KEYS[4] quarantine  hash  entry name -> why it is quarantined
-- KEYS[5] stats       hash  the partition's counters, summed ("n:<reason>")
-- KEYS[6] names       zset  every entry's name, each scored 0
-- KEYS[7] paused      set   the paused entries
-- KEYS[8] disabled    set   the disabled entries
-- KEYS[9] ended       set   the entries with no next tick
-- KEYS[10] overdue     zset  overdue entry -> since when (ms)
-- KEYS[11] failing     zset  failing entry -> since when (ms)
-- KEYS[12] running     zset  entry with a running marker -> until when (ms)
--   (the read side's indexes, kept as each state is saved: see _common.lua)
-- KEYS[13] changed     zset  entry name -> when a writer last changed it (ms)
-- KEYS[14] pauses      zset  entry paused until an instant -> that instant (ms)
-- KEYS[15] audit       hash  entry name -> its audit trail (see _common.lua)
-- KEYS[16] audit_newest  zset  entry name -> when its newest audit record was written (ms)
-- ARGV[1] changes channel; ARGV[2] entry name; ARGV[3] "pause" or "resume"
-- ARGV[4] pause: note text ("" for none); resume: nominal instant of the next tick (ms) or ""
-- ARGV[5] pause: until when (ms), or "" for until resumed; resume: due instant of the next
--         tick (ms, jitter applied) or ""
-- ARGV[6] pause: "fresh" to leave an entry paused already as it is, or ""; resume: the
--         end (ms) of the timed pause that a beat ends (claim.lua listed it), or ""
-- ARGV[7] resume: "paused" to leave an entry that is not paused as it is, or ""
-- ARGV[8] the audit context (see _common.lua): a pause is recorded as "pause" with its
--         note (and its end), a resume as "resume"; an answer other than "ok" records
--         nothing
--
-- A timed pause keeps its end in the state ("until") and in the pauses zset, which
-- claim.lua reads: the first beat pass at or after the end lists the entry, and that
-- beat resumes it from its next tick after the end (so ticks a beat missed after the end
-- follow the entry's catch-up policy). Its resume names the end it saw: a pause changed
-- since is left alone. A resumed entry whose runs reached its max_runs stays ended.
--
-- Returns "ok", "missing" when there is no such entry, "damaged: <reason>" when its
-- state cannot be read (update or delete repairs it), "paused already" (pause, fresh) or
-- "changed" (resume of a pause that ended, or changed since; or of an entry not paused).

local entries, due, states, quarantine = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local pauses = KEYS[14]
local channel, name, action = ARGV[1], ARGV[2], ARGV[3]
local now = clock_ms('')

local definition = redis.call('HGET', entries, name)
if not definition then
  redis.call('ZREM', pauses, name)
  return 'missing'
end
keep_indexes(KEYS[5], 6)
local state, unreadable = load_state(states, name)
if unreadable then return 'damaged: ' .. unreadable end
if action == 'pause' then
  if ARGV[6] == 'fresh' and state.paused == '1' then return 'paused already' end
  state.paused, state.note = '1', ARGV[4]
  redis.call('ZREM', due, name)
  if ARGV[5] ~= '' then
    state['until'] = ARGV[5]
    redis.call('ZADD', pauses, ARGV[5], name)
  else
    state['until'] = nil
    redis.call('ZREM', pauses, name)
  end
else
  if ARGV[6] ~= '' and tostring(state['until']) ~= ARGV[6] then
    if state['until'] == nil then redis.call('ZREM', pauses, name) end
    return 'changed'
  end
  if ARGV[7] == 'paused' and state.paused ~= '1' then return 'changed' end
  state.paused, state.note, state['until'], state.resumed = nil, nil, nil, now
  redis.call('ZREM', pauses, name)
  local limit = string.find(definition, '"max_runs":', 1, true)
    and tonumber(decoded(definition).max_runs)
  state.next = ARGV[4]
  if limit and (tonumber(state.runs) or 0) >= limit then state.next = '' end
  if state.next ~= '' and redis.call('HEXISTS', quarantine, name) == 0 then
    redis.call('ZADD', due, ARGV[5], name)
  end
end
state.version = (tonumber(state.version) or 0) + 1
save_state(states, name, state)
audit_context(ARGV[8], KEYS[15], KEYS[16])
if action == 'pause' then
  audit(name, now, 'pause', ARGV[4], ARGV[5] ~= '' and {['until'] = tonumber(ARGV[5])} or nil)
else
  audit(name, now, 'resume')
end
note_change(KEYS[13], name, now)
redis.call('PUBLISH', channel, name)
return 'ok'
