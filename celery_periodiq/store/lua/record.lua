-- record: note a run published outside the beat's claims (trigger(), @reboot).
--
-- Appends the event to the entry's history, counts it as enqueued and, unless set,
-- notes when its message started waiting (begin.lua clears that). Writes nothing for
-- an entry that no longer exists, or whose history key holds another type.
--
-- KEYS[1] entries  hash  entry name -> definition JSON
-- KEYS[2] state    hash  entry name -> state JSON
-- KEYS[3] history  list  the entry's history
-- KEYS[4] stats    hash  the partition's counters, summed ("n:<reason>")
-- KEYS[5] names       zset  every entry's name, each scored 0
-- KEYS[6] paused      set   the paused entries
-- KEYS[7] disabled    set   the disabled entries
-- KEYS[8] ended       set   the entries with no next tick
-- KEYS[9] overdue     zset  overdue entry -> since when (ms)
-- KEYS[10] failing     zset  failing entry -> since when (ms)
-- KEYS[11] running     zset  entry with a running marker -> until when (ms)
--   (the read side's indexes, kept as each state is saved: see _common.lua)
-- KEYS[12] audit       hash  entry name -> its audit trail (see _common.lua)
-- KEYS[13] audit_newest  zset  entry name -> when its newest audit record was written (ms)
-- ARGV[1] entry name; ARGV[2] history length; ARGV[3] event kind ("triggered", "enqueued")
-- ARGV[4] tick (ms) or ""; ARGV[5] task id as the history records it; ARGV[6] note
-- ARGV[7] the audit context (see _common.lua), or "": a run triggered is recorded as
--         "trigger" with its task id; ARGV[3] "backfill" records a backfill (ARGV[6] the
--         ticks it runs) in the audit trail alone (no history, nothing counted)
--
-- Returns 1 when recorded, 0 when not.

local entries, states, history = KEYS[1], KEYS[2], KEYS[3]
local name, keep = ARGV[1], tonumber(ARGV[2])

if redis.call('HEXISTS', entries, name) == 0 or wrong_type(history, 'list') then return 0 end
local now = clock_ms('')
audit_context(ARGV[7], KEYS[12], KEYS[13])
if ARGV[3] == 'backfill' then
  audit(name, now, 'backfill', ARGV[6])
  return 1
end
keep_indexes(KEYS[4], 5)
local state = load_state(states, name) or {}
count(state, 'enqueued', 1)
state.waiting_since = state.waiting_since or now
save_state(states, name, state)
record(history, keep, ARGV[3], now, ARGV[4], ARGV[5], '', ARGV[6])
if ARGV[3] == 'triggered' then audit(name, now, 'trigger', nil, {task_id = ARGV[5]}) end
return 1
