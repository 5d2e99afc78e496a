-- put: create or replace entries, and schedule their next tick.
--
-- Used by the API (add, update) and by the beat's reconciliation on start.
-- Per entry the mode decides what may happen:
--   add        fail if the name exists
--   update     fail if the name does not exist
--   reconcile  create, or replace if the stored digest differs or the entry is
--              quarantined; never replace an entry whose source is "runtime"
--              (those belong to the API)
-- A replaced entry gets a new version and its next tick computed afresh
-- (by the caller); its run state, counters and history are kept. Writing an
-- entry repairs it: keys of the wrong type are deleted and its quarantine is
-- lifted. An entry created by "add" starts clean: keys left behind by a definition
-- that vanished outside periodiq are deleted.
--
-- KEYS[1] entries     hash  entry name -> definition JSON
-- KEYS[2] due         zset  entry name -> due instant (ms)
-- KEYS[3] declared    set   names of the entries declared in code or config (reconciliation
--                           compares with it instead of reading every definition)
-- KEYS[4] events      hash  entry name -> "reboot" or "shutdown", for cluster-event entries
-- KEYS[5] quarantine  hash  entry name -> why it is quarantined
-- ARGV[1] key tag; ARGV[2] changes channel; ARGV[3] mode
-- ARGV[4..] one JSON object per entry:
--   name, definition (JSON text), digest, owner (or null), source,
--   next, due   nominal and jittered instants of the first tick (ms), or null
--   schedule    true if the entry should be in the due set (enabled, clock-driven)
--   event       "reboot" or "shutdown" for a cluster-event entry, else null
--
-- Returns one status per entry: "created", "replaced", "unchanged",
-- "exists" (add on an existing name), "missing" (update on an unknown name),
-- or "runtime" (reconcile met a runtime entry of that name).
--
-- Touches per entry: every key of the entry (types; wrong ones deleted),
-- <tag>:state:<name> (version, digest, next, created), <tag>:owner:<owner> (set of
-- names). Publishes once on the changes channel if anything changed: the entry's
-- name, or "<n> entries".

local entries, due, declared, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local quarantine = KEYS[5]
local tag, channel, mode = ARGV[1], ARGV[2], ARGV[3]
local changed, last_changed = 0, nil

local now = clock_ms('')
local out = {}

local function owner_of(definition)
  local owner = decoded(definition).owner
  if type(owner) ~= 'string' then return nil end
  return owner
end

local function stored_digest(name, keys)
  if damaged(keys) or redis.call('HEXISTS', quarantine, name) == 1 then return nil end
  return redis.call('HGET', keys[1], 'digest')
end

for i = 4, #ARGV do
  local e = cjson.decode(ARGV[i])
  local keys = entry_keys(tag, e.name)
  local state = keys[1]
  local old = redis.call('HGET', entries, e.name)
  local status
  if old and mode == 'add' then
    status = 'exists'
  elseif not old and mode == 'update' then
    status = 'missing'
  elseif old and mode == 'reconcile' and decoded(old).source == 'runtime' then
    status = 'runtime'
  elseif old and mode == 'reconcile' and stored_digest(e.name, keys) == e.digest then
    status = 'unchanged'
  else
    status = old and 'replaced' or 'created'
    if old then
      local previous = owner_of(old)
      if previous then redis.call('SREM', usable_set(tag .. ':owner:' .. previous), e.name) end
      repair(keys)
    elseif mode == 'add' then
      for k = 1, #keys, 2 do redis.call('DEL', keys[k]) end
    else
      repair(keys)  -- a declared entry written again keeps what is left of its state
    end
    local owner = e.owner
    if owner ~= nil and owner ~= cjson.null then
      redis.call('SADD', usable_set(tag .. ':owner:' .. owner), e.name)
    end
    redis.call('HSET', entries, e.name, e.definition)
    redis.call('HDEL', quarantine, e.name)
    if type(e.event) == 'string' then
      redis.call('HSET', events, e.name, e.event)
    else
      redis.call('HDEL', events, e.name)
    end
    if e.source == 'code' or e.source == 'config' then
      redis.call('SADD', declared, e.name)
    else
      redis.call('SREM', declared, e.name)
    end
    redis.call('HINCRBY', state, 'version', 1)
    redis.call('HSET', state, 'digest', e.digest, 'updated', now)
    redis.call('HSETNX', state, 'created', now)
    local paused = redis.call('HGET', state, 'paused') == '1'
    if e.schedule and not paused and e.next ~= nil and e.next ~= cjson.null then
      redis.call('HSET', state, 'next', e.next)
      redis.call('ZADD', due, e.due, e.name)
    else
      redis.call('HSET', state, 'next', (e.next ~= nil and e.next ~= cjson.null) and e.next or '')
      redis.call('ZREM', due, e.name)
    end
    changed = changed + 1
    last_changed = e.name
  end
  out[#out + 1] = status
end
-- one message per call: the entry's name, or how many changed in a bulk call
if changed == 1 then
  redis.call('PUBLISH', channel, last_changed)
elseif changed > 1 then
  redis.call('PUBLISH', channel, changed .. ' entries')
end
return out
