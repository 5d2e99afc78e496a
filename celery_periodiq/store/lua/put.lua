-- put: create or replace entries of one partition, and schedule their next tick.
--
-- Used by the API (add, update) and by the beat's reconciliation on start.
-- Per entry the mode decides what may happen:
--   add        fail if the name exists
--   update     fail if the name does not exist
--   reconcile  create, or replace if the stored digest differs or the entry is
--              quarantined; never replace an entry whose source is "runtime"
--              (those belong to the API), nor one written by a newer generation of
--              declarations while a beat of that generation lives (an older beat
--              never overwrites a newer definition; once the newer beats are gone,
--              as when a deploy is rolled back, it may). The entry's state keeps
--              the generation that wrote it, or last declared it unchanged.
-- A replaced entry gets a new version and its next tick computed afresh (by the
-- caller); its run state, counters, history and incarnation are kept. A created one
-- gets a new incarnation ("inc" in its state): claims made before a delete name the
-- old one, and claim.lua and ack.lua apply none of them to the new entry. Writing an entry repairs
-- it: a state that is not JSON starts afresh, history keys of another type are
-- deleted, its quarantine is lifted. An entry created by "add" starts clean: keys
-- left behind by a definition that vanished outside periodiq are deleted.
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] due         zset  entry name -> due instant (ms)
-- KEYS[3] declared    set   names of the entries declared in code or config
-- KEYS[4] events      hash  entry name -> "reboot" or "shutdown", for cluster-event entries
-- KEYS[5] quarantine  hash  entry name -> why it is quarantined
-- KEYS[6] state       hash  entry name -> state JSON
-- KEYS[7] generations zset  generation -> when its last beat's heartbeat runs out (ms)
-- KEYS[8..] four per entry, in ARGV's order: the owner set it had (as the caller read
--           it; unused by "add"), the owner set it gets, its history list, its failures list;
--           then the partition's stats hash (the counters summed, "n:<reason>") and the
--           read side's indexes kept from each entry written (see _common.lua): names,
--           paused, disabled, ended, overdue, failing and running; then changed: the
--           partition's change log (zset name -> ms: an entry created or replaced is
--           noted); last, audit and audit_newest: the audit trails (see _common.lua)
-- ARGV[1] changes channel; ARGV[2] mode
-- ARGV[3] the writer's generation (reconcile; "" for none)
-- ARGV[4] the audit context (see _common.lua): each entry created is recorded as "add",
--         each replaced as "update" with what its definition changed
-- ARGV[5..] twelve per entry ("" for none):
--   name, digest, owner, source,
--   was_owner   the owner the caller read before the call
--   next, due   nominal and jittered instants of the first tick (ms)
--   schedule    "1" if the entry should be in the due set (enabled, clock-driven)
--   event       "reboot" or "shutdown" for a cluster-event entry
--   alert       ms without a successful run before the entry is overdue
--   max_runs    the most ticks the beat may publish for it: an entry whose state
--               counts that many runs already gets no next tick (it has ended)
--   definition  its definition JSON text
--
-- Returns one status per entry: "created", "replaced", "unchanged", "exists" (add on
-- an existing name), "missing" (update on an unknown name), "runtime" (reconcile met a
-- runtime entry of that name), "newer" (reconcile met a definition a newer live
-- generation wrote: nothing written) or "retry" (its owner changed since the caller read it:
-- nothing written; read again and call again).
--
-- Publishes once on the changes channel if anything changed: the entry's name, or
-- "<n> entries".

local entries, due, declared, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local quarantine, states, generations = KEYS[5], KEYS[6], KEYS[7]
local channel, mode, writer = ARGV[1], ARGV[2], tonumber(ARGV[3])
keep_indexes(KEYS[#KEYS - 10], #KEYS - 9)
local change_log = KEYS[#KEYS - 2]
audit_context(ARGV[4], KEYS[#KEYS - 1], KEYS[#KEYS])
-- A partition with no entry yet and no indexes built: its indexes are complete once
-- cleared (no rebuild needed at the first read of a new schedule).
if redis.pcall('HEXISTS', IDX.stats, 'idx') == 0 and redis.call('HLEN', entries) == 0
    and redis.call('HLEN', quarantine) == 0 then
  clear_indexes()
  redis.call('HSET', IDX.stats, 'idx', INDEX_VERSION)
end
local changed, last_changed = 0, nil

local now = clock_ms('')
local out = {}
-- An incarnation id: this call's instant to the microsecond, and a count within it.
local time = redis.call('TIME')
local incarnation, created = time[1] .. time[2], 0

local function given(value)
  return value ~= nil and value ~= cjson.null
end

local function text(value)
  if value == '' then return nil end
  return value
end

local function owner_of(definition)
  local owner = decoded(definition).owner
  if type(owner) ~= 'string' or owner == '' then return nil end
  return owner
end

-- The writes of a bulk call are gathered and sent as one command per key at the end
-- (a call per entry per key costs most of a bulk load), or sooner when a name comes
-- again in one call, so that it reads what was written for it.
local definitions, saved, scheduled, cleared, unquarantined, unevented = {}, {}, {}, {}, {}, {}
local named, sums = {}, {}
local pending = {}

local function send(command, key, args)
  -- unpack() is bounded by Lua's C stack: at most 4000 arguments a command
  for first = 1, #args, 4000 do
    redis.call(command, key, unpack(args, first, math.min(first + 3999, #args)))
  end
end

local function flush()
  if #definitions > 0 then send('HSET', entries, definitions) end
  if #saved > 0 then send('HSET', states, saved) end
  if #scheduled > 0 then send('ZADD', due, scheduled) end
  for first = 1, #cleared, 4000 do
    redis.call('DEL', unpack(cleared, first, math.min(first + 3999, #cleared)))
  end
  if #unquarantined > 0 then send('HDEL', quarantine, unquarantined) end
  if #unevented > 0 then send('HDEL', events, unevented) end
  for first = 1, #named, 4000 do  -- an index: written with pcall, as _common.lua's
    redis.pcall('ZADD', IDX.names, unpack(named, first, math.min(first + 3999, #named)))
  end
  named = {}
  definitions, saved, scheduled, cleared, unquarantined, unevented = {}, {}, {}, {}, {}, {}
  pending = {}
end

-- Whether `state` was written by a generation newer than the writer's, one of whose
-- beats still lives.
local function newer_lives(state)
  local gen = tonumber(state.gen)
  if not writer or not gen or gen <= writer then return false end
  local until_ms = tonumber(redis.call('ZSCORE', generations, string.format('%d', gen)))
  return until_ms ~= nil and until_ms > now
end

local function save(name, state)
  saved[#saved + 1] = name
  saved[#saved + 1] = cjson.encode(state)
  local after = facts(state)
  index_facts(name, BEFORE[name] or nil, after, sums)
  BEFORE[name] = after
end

local function disabled(definition)
  return definition ~= nil and string.find(definition, '"enabled":false', 1, true) ~= nil
    and decoded(definition).enabled == false
end

for i = 5, #ARGV, 12 do
  local e = {name = ARGV[i], digest = ARGV[i + 1], owner = text(ARGV[i + 2]),
    source = ARGV[i + 3], was_owner = text(ARGV[i + 4]), next = tonumber(ARGV[i + 5]),
    due = tonumber(ARGV[i + 6]), schedule = ARGV[i + 7] == '1', event = text(ARGV[i + 8]),
    alert = tonumber(ARGV[i + 9]), max_runs = tonumber(ARGV[i + 10]), definition = ARGV[i + 11]}
  if pending[e.name] then flush() end
  pending[e.name] = true
  local base = 7 + (i - 5) / 12 * 4
  local was_set, owner_set, history, failures = KEYS[base + 1], KEYS[base + 2],
    KEYS[base + 3], KEYS[base + 4]
  local old = redis.call('HGET', entries, e.name)
  local state, unreadable
  if mode ~= 'add' then  -- "add" only writes new entries, which start with a new state
    state, unreadable = load_state(states, e.name)
  end
  local status
  if old and mode == 'add' then
    status = 'exists'
  elseif not old and mode == 'update' then
    status = 'missing'
  elseif old and mode == 'reconcile' and decoded(old).source == 'runtime' then
    status = 'runtime'
  elseif old and owner_of(old) ~= (given(e.was_owner) and e.was_owner or nil) then
    status = 'retry'
  elseif old and mode == 'reconcile' and not unreadable and newer_lives(state) then
    status = state.digest == e.digest and 'unchanged' or 'newer'
  elseif old and mode == 'reconcile' and not unreadable and state.digest == e.digest
      and redis.call('HEXISTS', quarantine, e.name) == 0
      and not wrong_type(history, 'list') and not wrong_type(failures, 'list') then
    status = 'unchanged'
    local alert = given(e.alert) and e.alert or nil
    local gen = writer or state.gen  -- the declaring generation takes the entry over
    if state.alert ~= alert or state.gen ~= gen then  -- alert: the default changed, or
      state.alert = alert                             -- the entry predates alerts
      state.gen = gen
      save(e.name, state)
    end
  else
    status = old and 'replaced' or 'created'
    note_change(change_log, e.name, clock_ms(''))
    if old then
      audit(e.name, now, 'update', nil, definition_changes(old, e.definition))
    else
      audit(e.name, now, 'add')
    end
    if old and owner_of(old) then redis.call('SREM', usable_set(was_set), e.name) end
    if given(e.owner) then redis.call('SADD', usable_set(owner_set), e.name) end
    if not old and mode == 'add' then
      cleared[#cleared + 1] = history
      cleared[#cleared + 1] = failures
      -- a state left behind by a definition deleted outside periodiq: what it counted
      -- (while its name is indexed) leaves the indexes with it
      local left = BEFORE[e.name] == nil and redis.call('HGET', states, e.name)
      if left and type(redis.pcall('ZSCORE', IDX.names, e.name)) == 'string' then
        BEFORE[e.name] = facts(parse_state(left) or {})
      end
      state = {}
    else
      if wrong_type(history, 'list') then redis.call('DEL', history) end
      if wrong_type(failures, 'list') then redis.call('DEL', failures) end
      state = state or {}  -- a declared entry written again keeps what is left of its state
    end
    definitions[#definitions + 1] = e.name
    definitions[#definitions + 1] = e.definition
    named[#named + 1] = 0
    named[#named + 1] = e.name
    if disabled(e.definition) then
      redis.pcall('SADD', IDX.disabled, e.name)
    elseif old then
      redis.pcall('SREM', IDX.disabled, e.name)
    end
    unquarantined[#unquarantined + 1] = e.name
    if type(e.event) == 'string' then
      redis.call('HSET', events, e.name, e.event)
    else
      unevented[#unevented + 1] = e.name
    end
    if e.source == 'code' or e.source == 'config' then
      redis.call('SADD', declared, e.name)
    else
      redis.call('SREM', declared, e.name)
    end
    if type(state.inc) ~= 'string' then  -- a new entry: a new incarnation (see claim.lua)
      created = created + 1
      state.inc = incarnation .. '.' .. created
    end
    state.version = (tonumber(state.version) or 0) + 1
    state.digest = e.digest
    state.gen = writer or state.gen
    state.updated = now
    state.created = state.created or now
    state.alert = given(e.alert) and e.alert or nil
    local ended = e.max_runs and (tonumber(state.runs) or 0) >= e.max_runs
    if ended then
      state.next = ''
      redis.call('ZREM', due, e.name)
    elseif e.schedule and state.paused ~= '1' and given(e.next) then
      state.next = e.next
      scheduled[#scheduled + 1] = e.due
      scheduled[#scheduled + 1] = e.name
    else
      state.next = given(e.next) and e.next or ''
      redis.call('ZREM', due, e.name)
    end
    save(e.name, state)
    changed = changed + 1
    last_changed = e.name
  end
  out[#out + 1] = status
end
flush()
for reason, n in pairs(sums) do
  if n ~= 0 then redis.pcall('HINCRBY', IDX.stats, 'n:' .. reason, n) end
end
-- one message per call: the entry's name, or how many changed in a bulk call
if changed == 1 then
  redis.call('PUBLISH', channel, last_changed)
elseif changed > 1 then
  redis.call('PUBLISH', channel, changed .. ' entries')
end
return out
