-- _common: helpers prepended to every script by scripts.py; never loaded on its own.
--
-- An entry's state is one JSON object in its partition's state hash:
--   next, version, prev, digest, created, updated, paused, note,
--   last_run, last_task_id, last_status, last_finished, last_duration, last_error,
--   last_enqueued, last_tick, waiting_since   (numbers in ms, or text)
--   running, queued   {task id, until ms[, attempt]}: markers that stop counting at "until"
--   top, seen         the newest started tick (ms) and how far before it (ms) the
--                     other recently started ticks were (at most WINDOW of them)
--   tokens            the attempt tokens of the runs that started and have not ended
--                     yet, newest first (at most WINDOW): a begin sent again is known by
--                     its own (begin.lua); finish.lua forgets a run's as it ends
--   refused           {token, outcome, note} of the newest refused begins (at most
--                     REFUSALS, begin.lua), newest first: one sent again is told the same
--   alert             ms without a success before the entry is overdue (none: never)
--   gen               the generation of the declaration set that wrote (or last declared)
--                     a declared entry (put.lua, remove.lua)
--   last_ok, resumed  when the last run succeeded, when the entry was last resumed
--   fails             failed or timeboxed runs in a row
--   overdue, failing  since when the entry is overdue, failing (absent: it is not)
--   n                 {reason = count}
--   paced             when the last run that kept its place began (catch-up runs do not
--                     move it): what the too-soon rule counts from
--   owed              ticks folded into the next run, which stands for them
--   inc               the entry's incarnation: set when it is created, ended by a delete
-- An event in an entry's history is a JSON array (see record() below); its task_id is
--   "" when it is the one derived from the tick (the caller knows), "-" for none.

local WINDOW = 16

-- The server clock in ms and the microseconds past it, or the caller's override
-- (tests inject a clock as an ARGV; "" means none).
local function clock_ms(override)
  if override and override ~= '' then return tonumber(override), 0 end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[2]) % 1000
end

-- Stored JSON may be garbage written by someone else: read it defensively.
local function decoded(text)
  local readable, value = pcall(cjson.decode, text)
  if readable and type(value) == 'table' then return value end
  return {}
end

-- An entry's state from its stored JSON (false: none), or nil and why it cannot be read
-- (not a JSON object).
local function parse_state(raw)
  if not raw then return {}, nil end
  local readable, value = pcall(cjson.decode, raw)
  if readable and type(value) == 'table' then return value, nil end
  return nil, 'its state is not a JSON object'
end

-- The read side's indexes (keys.py: names, paused, disabled, ended, overdue, failing,
-- running, and the counters summed as "n:<reason>" in stats): what each entry's state
-- says, kept per partition so that a scrape or a page never reads every state. A script
-- that keeps them calls keep_indexes() first; then load_state() notes the facts of each
-- state it loads and save_state() writes what changed. Written with pcall: a damaged
-- index key never stops a tick (doctor rebuilds the indexes, index.lua).
local IDX = nil
local BEFORE = {}
local UNKNOWN = {unknown = true, n = {}}

local INDEX_VERSION = '1'  -- entry_scripts.INDEX_VERSION: written to stats' "idx"

local function keep_indexes(stats, first)
  IDX = {stats = stats, names = KEYS[first], paused = KEYS[first + 1],
    disabled = KEYS[first + 2], ended = KEYS[first + 3], overdue = KEYS[first + 4],
    failing = KEYS[first + 5], running = KEYS[first + 6]}
end

-- A whole count, or 0 (as the read side reads one: "1.5" or garbage count nothing).
local function whole(value)
  local n = tonumber(value)
  if n and n == math.floor(n) and n > -1e15 and n < 1e15 then return n end
  return 0
end

-- What the indexes hold of a state: false when absent.
local function facts(state)
  local n = {}
  if type(state.n) == 'table' then
    for reason, value in pairs(state.n) do
      if type(reason) == 'string' then n[reason] = whole(value) end
    end
  end
  local running = type(state.running) == 'table' and type(state.running[1]) == 'string'
    and tonumber(state.running[2]) or false
  return {paused = state.paused == '1', ended = state.next == '',
    overdue = tonumber(state.overdue) or false, failing = tonumber(state.failing) or false,
    running = running, n = n}
end

local FACTS = {'paused', 'ended', 'overdue', 'failing', 'running'}
local SETS = {paused = true, ended = true}  -- the others are zsets: name -> instant (ms)
local NONE = {n = {}}

-- Write what changed between two facts (`before`: nil for no entry, UNKNOWN when its
-- state could not be read: every membership is then written, and its counters are
-- taken as none); `after` nil for an entry removed. Counters changed are added to
-- `sums` when given (a caller that writes many adds them up once), else written.
local function index_facts(name, before, after, sums)
  before = before or NONE
  local gone = after == nil
  after = after or NONE
  for _, fact in ipairs(FACTS) do
    local was, is = before[fact] or false, after[fact] or false
    if before.unknown or was ~= is then
      if SETS[fact] then
        redis.pcall(is and 'SADD' or 'SREM', IDX[fact], name)
      elseif is then
        redis.pcall('ZADD', IDX[fact], is, name)
      else
        redis.pcall('ZREM', IDX[fact], name)
      end
    end
  end
  local own = sums or {}
  for reason, n in pairs(after.n) do
    local d = n - (before.n[reason] or 0)
    if d ~= 0 then own[reason] = (own[reason] or 0) + d end
  end
  for reason, n in pairs(before.n) do
    if after.n[reason] == nil and n ~= 0 then own[reason] = (own[reason] or 0) - n end
  end
  if not sums then
    for reason, d in pairs(own) do
      if d ~= 0 then redis.pcall('HINCRBY', IDX.stats, 'n:' .. reason, d) end
    end
  end
  if gone then
    redis.pcall('ZREM', IDX.names, name)
    redis.pcall('SREM', IDX.disabled, name)
  end
end

local function load_state(key, name)
  local raw = redis.call('HGET', key, name)
  local state, why = parse_state(raw)
  if IDX and BEFORE[name] == nil then
    BEFORE[name] = (not raw and false) or (state and facts(state)) or UNKNOWN
  end
  return state, why
end

local function save_state(key, name, state)
  redis.call('HSET', key, name, cjson.encode(state))
  if IDX then
    local after = facts(state)
    index_facts(name, BEFORE[name] or nil, after)
    BEFORE[name] = after
  end
end

-- Index a name the indexes do not hold (a definition deleted outside periodiq, its
-- state left behind, now quarantined: listed again, as a full read lists it).
local function index_named(name, states)
  if type(redis.pcall('ZSCORE', IDX.names, name)) == 'string' then return end
  redis.pcall('ZADD', IDX.names, 0, name)
  local state = parse_state(redis.call('HGET', states, name))
  if state then index_facts(name, nil, facts(state)) end
end

local function count(state, reason, n)
  if type(state.n) ~= 'table' then state.n = {} end
  state.n[reason] = (tonumber(state.n[reason]) or 0) + n
end

-- Whether a marker ({task id, until}) still counts at `now`.
local function holds(marker, now)
  return type(marker) == 'table' and type(marker[1]) == 'string'
    and (tonumber(marker[2]) or 0) > now
end

-- Whether the delivery whose attempt token is `token` started (or resumed) its run: the
-- running marker is its, or its token is among those of the runs not ended yet.
local function started_by(state, token)
  if token == nil or token == '' then return false end
  if type(state.running) == 'table' and state.running[3] == token then return true end
  if type(state.tokens) == 'table' then
    for _, known in ipairs(state.tokens) do
      if known == token then return true end
    end
  end
  return false
end

-- Forget the attempt token of a run that ended (it sends no begin again).
local function forget_token(state, token)
  if token == nil or token == '' or type(state.tokens) ~= 'table' then return end
  local kept = {}
  for _, known in ipairs(state.tokens) do
    if known ~= token then kept[#kept + 1] = known end
  end
  state.tokens = #kept > 0 and kept or nil
end

-- Whether a run of tick `nominal` (ms) began: it is the newest started tick ("top") or
-- one of the others remembered ("seen": how far before top each was).
local function tick_began(state, nominal)
  local top = tonumber(state.top)
  if not nominal or not top or nominal > top then return false end
  if nominal == top then return true end
  if type(state.seen) == 'table' then
    for _, earlier in ipairs(state.seen) do
      if tonumber(earlier) == top - nominal then return true end
    end
  end
  return false
end

-- Why `key` cannot hold an entry's `kind` of data, or nil: another type was written there.
local function wrong_type(key, kind)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= kind then
    return 'key ' .. key .. ' holds a ' .. found .. ', not a ' .. kind
  end
  return nil
end

-- Append an event to a history list (newest first), keeping the newest `keep`. Stored
-- as [kind, tick, at, task_id, host, note, duration, missed, error], trailing ""s
-- dropped; with a tick, "at" is kept as milliseconds after it (a few digits, not 13).
local function record(key, keep, kind, at, tick, task_id, host, note, duration, missed, err)
  local t = tonumber(tick)
  local event = {kind, t or '', t and (at - t) or at, task_id or '', host or '', note or '',
    duration or '', missed or '', err or ''}
  local last = #event
  while last > 3 and event[last] == '' do last = last - 1 end
  local packed = {}
  for i = 1, last do packed[i] = event[i] end
  -- a list no longer than `keep` has nothing to trim
  if redis.call('LPUSH', key, cjson.encode(packed)) > keep then
    redis.call('LTRIM', key, 0, keep - 1)
  end
end

-- Alerts. An entry is overdue when no run succeeded for state.alert ms (counted from
-- its creation or its last resume when later), failing once state.fails reached its
-- threshold; recovered when a run succeeds again. Each change is recorded in the state
-- and pushed once onto the partition's alerts list, which a beat drains and sends.
local function push_alert(list, name, kind, at, note)
  redis.call('RPUSH', list, cjson.encode({name, kind, at, note}))
  redis.call('LTRIM', list, -1000, -1)
end

-- Histograms for /metrics, per partition: one hash field per bucket (counts not
-- cumulative: "<prefix><index>") and the sum in ms ("<prefix>sum"). Bounds in ms; the
-- same as metrics.BUCKETS.
local BUCKETS = {10, 50, 100, 500, 1000, 5000, 30000, 60000, 300000}
local function bucket(ms)
  for i, bound in ipairs(BUCKETS) do
    if ms <= bound then return i end
  end
  return #BUCKETS + 1
end

local function observe(key, prefix, ms)
  ms = math.max(ms, 0)
  redis.call('HINCRBY', key, prefix .. bucket(ms), 1)
  redis.call('HINCRBY', key, prefix .. 'sum', ms)
end

-- Quarantine an entry; the first time (not already quarantined) is an alert transition,
-- and true is returned (the caller records it in the audit trail).
local function quarantine_entry(key, name, problem, alerts, now)
  if redis.call('HSET', key, name, problem) == 1 then
    push_alert(alerts, name, 'quarantined', now, problem)
    return true
  end
  return false
end

-- How long the entry has gone without a success if that makes it newly overdue, else nil.
local function newly_overdue(state, now)
  local after = tonumber(state.alert)
  if not after or state.overdue or state.paused == '1' then return nil end
  local since = math.max(tonumber(state.last_ok) or 0, tonumber(state.created) or 0,
    tonumber(state.resumed) or 0)
  if now - since > after then return now - since end
  return nil
end

-- A set key that can take SADD/SREM: replaced when something else holds its name.
local function usable_set(key)
  if wrong_type(key, 'set') then redis.call('DEL', key) end
  return key
end


-- redis.call(command, key, items...) in calls of at most 1000 items (Lua's unpack has a
-- limit); an even size, so that pairs (field value, score member) stay whole. Returns the
-- replies' elements in order, for commands that reply with a list (HMGET).
local function chunked(command, key, items)
  local replies = {}
  for first = 1, #items, 1000 do
    local reply = redis.call(command, key, unpack(items, first, math.min(first + 999, #items)))
    if type(reply) == 'table' then
      for _, value in ipairs(reply) do replies[#replies + 1] = value end
    end
  end
  return replies
end

-- Empty the indexes and the counters summed (the histograms stay), before they are
-- built afresh (index.lua) or begun on a partition with no entry yet (put.lua).
local function clear_indexes()
  redis.call('DEL', IDX.names, IDX.paused, IDX.disabled, IDX.ended, IDX.overdue,
    IDX.failing, IDX.running)
  if wrong_type(IDX.stats, 'hash') then redis.call('DEL', IDX.stats) end
  local summed = {}
  for _, field in ipairs(redis.call('HKEYS', IDX.stats)) do
    if string.sub(field, 1, 2) == 'n:' then summed[#summed + 1] = field end
  end
  if #summed > 0 then chunked('HDEL', IDX.stats, summed) end
end

-- How long a writer's change stays in a partition's change log (ms): longer than any
-- staged message waits for its instant (the beat's stage horizon is at most 10 minutes).
local CHANGE_LOG_MS = 660000

-- Note in the partition's change log ("changed": zset name -> ms) that a writer changed
-- the entry now: a message staged for it before now is not released (see the beat's
-- staging.py). Changes older than CHANGE_LOG_MS leave the log, and the log goes with
-- them when nothing was written for that long.
local function note_change(changed, name, now)
  if not wrong_type(changed, 'zset') then
    redis.call('ZADD', changed, now, name)
    redis.call('ZREMRANGEBYSCORE', changed, '-inf', now - CHANGE_LOG_MS)
    redis.call('PEXPIRE', changed, CHANGE_LOG_MS)
  end
end

-- The audit trail (keys.py: audit, audit_newest). A writer is given its audit context as
-- one ARGV, JSON [actor, via, note, keep, window ms] ("" for none: nothing is recorded),
-- and records each change in the call that makes it: no change escapes the trail, and
-- none is recorded that did not happen. An entry's trail is one field of the partition's
-- audit hash: its records newest first, one JSON array a line,
--   [at ms, action, actor, via, note, detail]   (trailing ""s dropped)
-- detail: {changes = {field = [before, after]}} (update), {until = ms} (pause),
-- {task_id = id} (trigger). The newest `keep` records within `window` ms are kept (older
-- ones leave at the entry's next record; readers skip them). audit_newest holds each
-- trail's newest record (ms): a trail whose newest is older than the window, a deleted
-- entry's ending with its delete, is dropped (a few at each record written); an entry
-- written again within it keeps its trail; the whole schedule's newest trails are read
-- from it. The context is read only when a record is written (the beats' and the
-- workers' scripts record a rare quarantine).
local AUDIT, AUDIT_GIVEN = nil, nil

local function audit_context(text, hash, newest)
  AUDIT, AUDIT_GIVEN = nil, nil
  if text ~= nil and text ~= '' then AUDIT_GIVEN = {text, hash, newest} end
end

local function audit_opened()
  if AUDIT or not AUDIT_GIVEN then return AUDIT end
  local text, hash, newest = AUDIT_GIVEN[1], AUDIT_GIVEN[2], AUDIT_GIVEN[3]
  AUDIT_GIVEN = nil
  local readable, given = pcall(cjson.decode, text)
  if not readable or type(given) ~= 'table' or (tonumber(given[4]) or 0) <= 0 then return nil end
  AUDIT = {actor = tostring(given[1] or ''), via = tostring(given[2] or ''),
    note = type(given[3]) == 'string' and given[3] or '', keep = tonumber(given[4]),
    window = tonumber(given[5]) or 0, hash = hash, newest = newest, pruned = false}
  return AUDIT
end

local function audit(name, now, action, note, detail)
  if not audit_opened() then return end
  local hash, newest, oldest = AUDIT.hash, AUDIT.newest, now - AUDIT.window
  if wrong_type(hash, 'hash') then redis.call('DEL', hash) end
  local record = {now, action, AUDIT.actor, AUDIT.via, note or AUDIT.note, detail or ''}
  while #record > 2 and record[#record] == '' do record[#record] = nil end
  local lines = {cjson.encode(record)}
  local old = redis.call('HGET', hash, name)
  if old then
    for line in string.gmatch(old, '[^\n]+') do
      if #lines >= AUDIT.keep then break end
      local at = tonumber(string.match(line, '^%[(%d+)'))
      if at and at >= oldest then lines[#lines + 1] = line end
    end
  end
  redis.call('HSET', hash, name, table.concat(lines, '\n'))
  if wrong_type(newest, 'zset') then redis.call('DEL', newest) end
  redis.call('ZADD', newest, now, name)
  if not AUDIT.pruned then  -- trails whose newest record is past the window: once a call
    AUDIT.pruned = true
    local stale = redis.call('ZRANGEBYSCORE', newest, '-inf', oldest, 'LIMIT', 0, 100)
    if #stale > 0 then
      redis.call('HDEL', hash, unpack(stale))
      redis.call('ZREM', newest, unpack(stale))
    end
  end
end

local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= 'table' then return a == b end
  for key, value in pairs(a) do
    if not same(value, b[key]) then return false end
  end
  for key in pairs(b) do
    if a[key] == nil then return false end
  end
  return true
end

-- A changed value as a record keeps it: null for none; one whose JSON is longer than
-- AUDIT_VALUE_MOST bytes (large args) as "(<n> bytes)", so that a trail stays small.
local AUDIT_VALUE_MOST = 256
local function kept_value(value)
  if value == nil then return cjson.null end
  if type(value) == 'table' or type(value) == 'string' then
    local size = #cjson.encode(value)
    if size > AUDIT_VALUE_MOST then return '(' .. size .. ' bytes)' end
  end
  return value
end

-- What an update changed: {changes = {field = [before, after]}} of two definitions (JSON
-- text; null for a field left out, which reads as its default), or nil when nothing did.
local function definition_changes(before, after)
  local old, new = decoded(before or ''), decoded(after or '')
  local changes, any = {}, false
  for key, value in pairs(new) do
    if not same(old[key], value) then
      changes[key] = {kept_value(old[key]), kept_value(value)}
      any = true
    end
  end
  for key, value in pairs(old) do
    if new[key] == nil then
      changes[key] = {kept_value(value), cjson.null}
      any = true
    end
  end
  return any and {changes = changes} or nil
end
