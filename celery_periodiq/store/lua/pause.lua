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
-- ARGV[1] changes channel; ARGV[2] entry name; ARGV[3] "pause" or "resume"
-- ARGV[4] pause: note text ("" for none); resume: nominal instant of the next tick (ms) or ""
-- ARGV[5] resume: due instant of the next tick (ms, jitter applied) or ""
--
-- A resumed entry whose runs reached its max_runs stays ended (no next tick).
--
-- Returns "ok", "missing" when there is no such entry, or "damaged: <reason>" when its
-- state cannot be read (update or delete repairs it).

local entries, due, states, quarantine = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local channel, name, action = ARGV[1], ARGV[2], ARGV[3]
local now = clock_ms('')

local definition = redis.call('HGET', entries, name)
if not definition then return 'missing' end
keep_indexes(KEYS[5], 6)
local state, unreadable = load_state(states, name)
if unreadable then return 'damaged: ' .. unreadable end
state.version = (tonumber(state.version) or 0) + 1
if action == 'pause' then
  state.paused, state.note = '1', ARGV[4]
  redis.call('ZREM', due, name)
else
  state.paused, state.note, state.resumed = nil, nil, now
  local limit = string.find(definition, '"max_runs":', 1, true)
    and tonumber(decoded(definition).max_runs)
  state.next = ARGV[4]
  if limit and (tonumber(state.runs) or 0) >= limit then state.next = '' end
  if state.next ~= '' and redis.call('HEXISTS', quarantine, name) == 0 then
    redis.call('ZADD', due, ARGV[5], name)
  end
end
save_state(states, name, state)
note_change(KEYS[13], name, now)
redis.call('PUBLISH', channel, name)
return 'ok'
