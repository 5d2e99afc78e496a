-- begin: the worker's guards before a run's body, atomically, in one call.
--
--   0. the message is consumed: a "queued" marker naming this task is cleared; a message
--      past its expiry (on this server's clock, not the worker's) is refused
--   1. duplicate tick: a tick whose run already began is dropped (the newest started
--      tick and the 15 before it are remembered; a tick older than all of them is
--      dropped too, since nothing can tell any more whether it ran)
--   2. tolerance drop: a scheduled run starting before last_run + min_gap is dropped
--   3. non-final check: under overlap "skip", a run of the entry that has not
--      reached a final state (its running marker holds) makes this run skip
--   4. otherwise the run starts: last_run = now, running marker set (until now + the
--      run's hard limit, so a dead worker stops blocking), tick remembered
-- A retry of a run that already began (retries > 0) skips 1-3 and keeps its marker.
-- A backfill run (ARGV[15]) is a past tick published on request: it is a duplicate if
-- its tick began (among the newest ticks, or in the entry's backfilled set), never for
-- being old, and it has no tolerance drop; once it begins its tick joins that set.
-- An entry that no longer exists gets no writes: a message published for it is refused
-- ("deleted"); a plain call of a declared task whose entry is not stored runs unguarded.
-- An entry whose history keys hold another type cannot be recorded: it is quarantined
-- and the run refused ("damaged"). A state that is not JSON starts afresh.
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] state       hash  entry name -> state JSON
-- KEYS[3] quarantine  hash  entry name -> why it is quarantined
-- KEYS[4] due         zset  entry name -> due instant
-- KEYS[5] history     list  the entry's history
-- KEYS[6] failures    list  the entry's newest failed runs (its type is checked)
-- KEYS[7] alerts      list  alert transitions (an entry newly quarantined is pushed)
-- KEYS[8] stats       hash  the partition's histograms: a started tick's delay ("s")
-- KEYS[9] backfilled  set   the entry's backfilled ticks (ms) that began
-- KEYS[10] names       zset  every entry's name, each scored 0
-- KEYS[11] paused      set   the paused entries
-- KEYS[12] disabled    set   the disabled entries
-- KEYS[13] ended       set   the entries with no next tick
-- KEYS[14] overdue     zset  overdue entry -> since when (ms)
-- KEYS[15] failing     zset  failing entry -> since when (ms)
-- KEYS[16] running     zset  entry with a running marker -> until when (ms)
--   (the read side's indexes, kept as each state is saved: see _common.lua)
-- KEYS[17] group       zset  the entry's group's run markers: task id -> until when (ms),
--   under the schedule's hash tag, not the partition's (a limit counts across partitions);
--   an unused key of the partition when no group limit applies (ARGV[20] is 0)
-- ARGV[1] task id
-- ARGV[2] tick: nominal instant (ms), or "" for a manual run (no tolerance drop)
-- ARGV[3] min_gap (ms): interval - tolerance, or 0
-- ARGV[4] overlap policy: "skip", "allow" or "buffer_one"
-- ARGV[5] marker TTL (ms)
-- ARGV[6] retries of this task id so far
-- ARGV[7] worker host
-- ARGV[8] history length
-- ARGV[9] now (ms) to use instead of the server clock, or "" (tests inject a clock here)
-- ARGV[10] entry name
-- ARGV[11] "1" if the message came from the beat or trigger() (the entry must exist)
-- ARGV[12] the message's expiry (ms), or ""
-- ARGV[13] the task id as the history records it: "" when the tick derives it
-- ARGV[14] this delivery's attempt token, or "": a begin sent again (its reply lost, or
--          its replicas behind) finds its token among those of the runs not ended yet
--          (whatever began since: another tick's run, a plain run that keeps no marker),
--          writes the state again unchanged and is told "started" (a retry: "resumed");
--          one that was refused finds its token among the entry's newest refusals (at
--          most REFUSALS), writes the state again unchanged and is told the same refusal,
--          recorded once, whatever changed since
-- ARGV[15] "1" for a backfill run
-- ARGV[16] how long the backfilled set is kept after its newest tick (ms)
-- ARGV[17] "1" for a catch-up run: published too late to keep its place, it is not
--          dropped as too soon, and the next on-time run's too-soon rule still counts
--          from the last run that kept its place ("paced" in the state)
-- ARGV[18] "1" for a plain task's run (a task without PeriodicTask, run by an entry):
--          only the duplicate, expiry and floor checks; no too-soon drop, no overlap
--          check, no running marker
-- ARGV[19] floor (ms), or "" / absent for none: a scheduled run (catch-up and plain
--          runs too, not a backfill) starting less than this after the last run began
--          (any run) is dropped as too soon: no two runs closer than half an interval,
--          whatever made either late
-- ARGV[20] the group's limit: at most this many runs of the group at once, or 0 / "" /
--          absent for none. A run that would start is refused ("dropped_group_limit")
--          while that many markers of KEYS[17] hold (those past their end are pruned: a
--          dead worker frees its slot when its hard limit ends, like the running marker);
--          a starting run adds its marker, until now + marker TTL, as the running marker
-- ARGV[21] "1": a run over the group limit waits instead: "waiting_group", nothing written
--          (the caller sends the begin again; the entry's message is still queued)
-- KEYS[18] audit       hash  entry name -> its audit trail (see _common.lua)
-- KEYS[19] audit_newest  zset  entry name -> when its newest audit record was written (ms)
-- ARGV[22] the audit context (see _common.lua), or "" / absent: an entry quarantined here
--          is recorded as "quarantine", by this worker
--
-- Returns {outcome, now_ms, last_run_ms or -1, note} where outcome is "started",
-- "resumed" (a retry), "duplicate", "dropped_too_soon", "skipped_overlap",
-- "dropped_group_limit", "waiting_group", "expired", "deleted", "damaged" or "unguarded", and note says why a run was refused.
-- Every outcome but deleted, damaged and unguarded clears the state's waiting_since:
-- a worker consumed the entry's message.

local entries, states, quarantine, due, history = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local task_id, tick, min_gap, overlap = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local ttl, retries, host, keep = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local name, shown_id = ARGV[10], ARGV[13]

local catchup, plain = ARGV[17] == '1', ARGV[18] == '1'
local floor = tonumber(ARGV[19] or '') or 0
local group, limit = KEYS[17], tonumber(ARGV[20] or '') or 0
if plain then limit = 0 end

local now = clock_ms(ARGV[9])
if redis.call('HEXISTS', entries, name) == 0 then
  if ARGV[11] == '1' then return {'deleted', now, -1, ''} end
  return {'unguarded', now, -1, ''}
end
local problem = wrong_type(history, 'list') or wrong_type(KEYS[6], 'list')
if problem then
  if quarantine_entry(quarantine, name, problem, KEYS[7], now) then
    audit_context(ARGV[22], KEYS[18], KEYS[19])
    audit(name, now, 'quarantine', problem)
  end
  redis.call('ZREM', due, name)
  return {'damaged', now, -1, problem}
end
keep_indexes(KEYS[8], 10)
local state = load_state(states, name) or {}
local last = tonumber(state.last_run)

-- the refusal of the begin with token `token` sent before, {token, outcome, note}, or nil
local function refused_by(state, token)
  if token == nil or token == '' or type(state.refused) ~= 'table' then return nil end
  for _, known in ipairs(state.refused) do
    if type(known) == 'table' and known[1] == token and type(known[2]) == 'string' then
      return known
    end
  end
  return nil
end

if started_by(state, ARGV[14]) then
  -- written again, unchanged: a WAIT after this call then counts a write of this
  -- connection, so it says whether a replica has the start (the reply may have been lost
  -- on another connection, or the replicas were behind when it was first written)
  save_state(states, name, state)
  return {retries > 0 and 'resumed' or 'started', now, last or -1, ''}
end
local refused = refused_by(state, ARGV[14])
if refused then  -- written again, unchanged, as a start is above
  save_state(states, name, state)
  return {refused[2], now, last or -1, refused[3] or ''}
end
if type(state.queued) == 'table' and state.queued[1] == task_id then state.queued = nil end
state.waiting_since = nil

local function event(kind, note)
  record(history, keep, kind, now, tick, shown_id, host, note)
end

-- this start's token, newest first, among those of the runs not ended (see started_by;
-- at most WINDOW: those of runs whose worker died are dropped oldest first)
local function remember_token()
  if ARGV[14] == '' then return end
  local tokens = {ARGV[14]}
  for _, known in ipairs(type(state.tokens) == 'table' and state.tokens or {}) do
    if #tokens >= WINDOW then break end
    tokens[#tokens + 1] = known
  end
  state.tokens = tokens
end

-- this refusal, newest first, among the entry's last REFUSALS (a begin is sent again
-- within seconds: its reply lost, or the replicas behind)
local REFUSALS = 4
local function remember_refusal(token, outcome, note)
  if token == '' then return end
  local kept = {{token, outcome, note}}
  for _, known in ipairs(type(state.refused) == 'table' and state.refused or {}) do
    if #kept >= REFUSALS then break end
    -- (what is not a refusal, written by someone else, is dropped)
    if type(known) == 'table' and type(known[1]) == 'string' and type(known[2]) == 'string' then
      kept[#kept + 1] = known
    end
  end
  state.refused = kept
end

local function refuse(outcome, note)
  count(state, outcome, 1)
  remember_refusal(ARGV[14], outcome, note)
  save_state(states, name, state)
  event(outcome, note)
  return {outcome, now, last or -1, note}
end

-- this run's slot in its group, until its running marker's end
local function hold_slot()
  if limit <= 0 then return end
  redis.call('ZADD', group, now + ttl, task_id)
  if redis.call('PTTL', group) < ttl then redis.call('PEXPIRE', group, ttl) end
end

if retries > 0 then
  if not plain then state.running = {task_id, now + ttl, ARGV[14]} end
  hold_slot()
  remember_token()
  save_state(states, name, state)
  event('retry', 'attempt ' .. (retries + 1))
  return {'resumed', now, last or -1, ''}
end
if ARGV[12] ~= '' and now > tonumber(ARGV[12]) then
  return refuse('expired', 'waited past its expiry, ' .. (now - tonumber(ARGV[12])) .. ' ms ago')
end
local nominal = tonumber(tick)
local backfill = ARGV[15] == '1'
if nominal then
  local member = redis.pcall('SISMEMBER', KEYS[9], tick)
  if type(member) == 'table' and member.err then
    -- the backfilled set is only a memory: one of another type is dropped, not quarantined
    redis.call('DEL', KEYS[9])
  elseif member == 1 then
    return refuse('duplicate', 'this tick already began (backfilled)')
  end
end
local top = tonumber(state.top)
local seen = type(state.seen) == 'table' and state.seen or {}
if tick_began(state, nominal) then return refuse('duplicate', 'this tick already began') end
if nominal and top and nominal < top and not backfill and #seen >= WINDOW - 1
    and top - nominal > (tonumber(seen[#seen]) or 0) then
  return refuse('duplicate', 'older than the ' .. WINDOW .. ' newest ticks that began')
end
-- the too-soon rule counts from the last run that kept its place, not from catch-up runs
local paced = tonumber(state.paced) or last
if nominal and not backfill and not catchup and not plain and paced
    and now < paced + min_gap then
  return refuse('dropped_too_soon', 'last run began ' .. (now - paced) .. ' ms ago')
end
if nominal and not backfill and last and now < last + floor then
  return refuse('dropped_too_soon', 'last run began ' .. (now - last) .. ' ms ago, less '
    .. 'than half an interval')
end
if overlap == 'skip' and not plain and holds(state.running, now)
    and state.running[1] ~= task_id then
  return refuse('skipped_overlap', 'run ' .. state.running[1] .. ' is unfinished')
end
if limit > 0 then
  -- the group's markers are only a memory: one of another type is dropped
  if wrong_type(group, 'zset') then redis.call('DEL', group) end
  redis.call('ZREMRANGEBYSCORE', group, '-inf', now)
  local held = redis.call('ZCARD', group)
  if held >= limit and not redis.call('ZSCORE', group, task_id) then
    if ARGV[21] == '1' then return {'waiting_group', now, last or -1, ''} end
    return refuse('dropped_group_limit', held .. ' runs of its group hold its limit, '
      .. limit)
  end
end

state.last_run, state.last_task_id, state.last_status = now, task_id, 'running'
-- (0: no run kept its place yet; a state from before "paced" counts from last_run)
if catchup then state.paced = paced or 0 else state.paced = now end
count(state, 'started', 1)
if not plain then state.running = {task_id, now + ttl, ARGV[14]} end
remember_token()
hold_slot()
if nominal then
  -- remember it: "seen" holds how far before "top" each other recent tick was, largest last
  local backs = {}
  if not top or nominal > top then
    if top then backs[1] = nominal - top end
    for _, earlier in ipairs(seen) do backs[#backs + 1] = (tonumber(earlier) or 0) + (nominal - (top or nominal)) end
    state.top = nominal
  else
    for _, earlier in ipairs(seen) do backs[#backs + 1] = tonumber(earlier) or 0 end
    backs[#backs + 1] = top - nominal
  end
  table.sort(backs)
  while #backs > WINDOW - 1 do table.remove(backs) end
  state.seen = backs
end
save_state(states, name, state)
if backfill and nominal then
  redis.call('SADD', KEYS[9], tick)
  redis.call('PEXPIRE', KEYS[9], tonumber(ARGV[16]))
elseif nominal then
  observe(KEYS[8], 's', now - nominal)
end
event('started', '')
return {'started', now, last or -1, ''}
