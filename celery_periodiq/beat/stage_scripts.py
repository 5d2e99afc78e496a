"""The broker-side scripts of staged release, run in the broker's Redis (see staging.py).

Laid out so that the release at the instant does as little as can be: per instant
``T`` (ms) and queue list ``Q`` (the whole key kombu pushes to), the messages wait in
a list the release moves into ``Q`` as they are, by one ``RENAME`` when ``Q`` is empty
(however many) and by ``LMOVE``s otherwise; a task id is recorded once when staged, so
the release looks at no message unless a writer changed one of the instant's entries
after its claim. Under the staging prefix ``S``:

- ``S:at``          zset   instant -> instant: the instants with messages waiting;
- ``S:count``       string how many messages wait, all instants (the cap counts them);
- ``S:claimed``     hash   instant -> the earliest claim (ms) of a message staged for it:
                           the changes a release must look at are those made after it;
- ``S:T:queues``    set    the queue lists with messages waiting for ``T``;
- ``S:T:q:Q``       list   the messages for ``Q``, the first staged at the right end
                           (kombu pushes left and pops right);
- ``S:T:h:Q``       list   aligned with it, ``"<claimed ms>,<id len>:<id><entry name>"``:
                           read only when a message may have to be dropped;
- ``S:T:names``     hash   entry name -> the earliest claim (ms) of its messages for ``T``;
- ``S:T:ids``       set    the task ids staged for ``T`` (a second copy is never staged);
                           once ``T`` is released, the ids released (a message dropped
                           leaves it), kept an hour after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import redis

from celery_periodiq.beat import redis_publish
from celery_periodiq.errors import BrokerRefusedError, BrokerUnavailableError

__all__ = [
    "FIRST_CLAIM",
    "RELEASE",
    "STAGE",
    "global_prefix",
    "on_broker",
    "staged_messages",
    "whole_keys",
]

STAGE = """
-- KEYS[1] S:at  KEYS[2] S:count  KEYS[3] S:claimed  KEYS[4] S:T:queues  KEYS[5] S:T:names
-- KEYS[6] S:T:ids
-- ARGV[1] T (ms); ARGV[2] the most messages that may wait; ARGV[3] S:T: (the instant's
-- prefix, whole); ARGV[4..] five per message: its claim (ms), task id, entry name,
-- queue list, message
-- A message whose task id is staged already is not staged again (another beat's copy
-- stands for it). Returns how many of those given are staged: the first ones; the
-- others are over the cap.
local waiting = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local room = math.max(tonumber(ARGV[2]) - waiting, 0)
local given = (#ARGV - 3) / 5
local take = math.min(room, given)
if take == 0 then return 0 end
local ids = {}
for i = 1, take do ids[i] = ARGV[i * 5] end
local known = {}
for first = 1, take, 1000 do
  local found = redis.call('SMISMEMBER', KEYS[6], unpack(ids, first, math.min(first + 999, take)))
  for j = 1, #found do known[first + j - 1] = found[j] end
end
local bodies, heads, new, earliest, names, seen = {}, {}, {}, {}, {}, {}
for i = 1, take do
  local at = (i - 1) * 5 + 4
  local id = ARGV[at + 1]
  if known[i] == 0 and not seen[id] then
    seen[id] = true
    local claimed, name, queue = tonumber(ARGV[at]), ARGV[at + 2], ARGV[at + 3]
    if not bodies[queue] then bodies[queue] = {}; heads[queue] = {} end
    table.insert(bodies[queue], ARGV[at + 4])
    table.insert(heads[queue], ARGV[at] .. ',' .. #id .. ':' .. id .. name)
    new[#new + 1] = id
    if not earliest[name] then names[#names + 1] = name end
    if not earliest[name] or claimed < earliest[name] then earliest[name] = claimed end
  end
end
if #new == 0 then return take end
local function push(key, values)
  for first = 1, #values, 1000 do
    redis.call('LPUSH', key, unpack(values, first, math.min(first + 999, #values)))
  end
end
local first_claim = math.huge
for queue, messages in pairs(bodies) do
  push(ARGV[3] .. 'q:' .. queue, messages)
  push(ARGV[3] .. 'h:' .. queue, heads[queue])
  redis.call('SADD', KEYS[4], queue)
end
for first = 1, #new, 1000 do
  redis.call('SADD', KEYS[6], unpack(new, first, math.min(first + 999, #new)))
end
for first = 1, #names, 1000 do
  local part = {unpack(names, first, math.min(first + 999, #names))}
  local had = redis.call('HMGET', KEYS[5], unpack(part))
  local set = {}
  for j, name in ipairs(part) do
    local before = tonumber(had[j])
    if not before or earliest[name] < before then
      set[#set + 1] = name
      set[#set + 1] = earliest[name]
    end
    if earliest[name] < first_claim then first_claim = earliest[name] end
  end
  if #set > 0 then redis.call('HSET', KEYS[5], unpack(set)) end
end
redis.call('INCRBY', KEYS[2], #new)
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[1])
local before = tonumber(redis.call('HGET', KEYS[3], ARGV[1]))
if not before or first_claim < before then redis.call('HSET', KEYS[3], ARGV[1], first_claim) end
return take
"""

FIRST_CLAIM = """
-- KEYS[1] S:at  KEYS[2] S:claimed; ARGV[1] now (ms)
-- Returns the earliest claim (ms) of the messages staged for instants up to now, or -1.
local earliest = -1
for _, instant in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])) do
  local claimed = tonumber(redis.call('HGET', KEYS[2], instant))
  if not claimed then return 0 end
  if earliest < 0 or claimed < earliest then earliest = claimed end
end
return earliest
"""

RELEASE = """
-- KEYS[1] S:at  KEYS[2] S:count  KEYS[3] S:claimed
-- ARGV[1] now (ms, the schedule's Redis clock as the caller reads it)
-- ARGV[2] the most messages to move one by one (a RENAME moves any number at once)
-- ARGV[3] JSON {entry name: ms of its last change}: a message whose claim came before
--         its entry's last change is dropped
-- ARGV[4] S (the staging prefix, with ':'); ARGV[5] how long an ids set is kept (ms)
-- Only messages of instants up to now are pushed, never one of a later instant. The
-- instants' keys are named from S (a broker is a single Redis, not a Cluster).
-- Returns {pushed, dropped, 1 if more is due else 0}.
local now, most = tonumber(ARGV[1]), tonumber(ARGV[2])
local changed = cjson.decode(ARGV[3])
local prefix, keep = ARGV[4], tonumber(ARGV[5])
local changed_names = {}
for name in pairs(changed) do changed_names[#changed_names + 1] = name end
local pushed, dropped, moved = 0, 0, 0

-- whether a message of an entry changed after its claim waits for the instant
local function any_stale(names_key)
  for first = 1, #changed_names, 1000 do
    local part = {unpack(changed_names, first, math.min(first + 999, #changed_names))}
    local claims = redis.call('HMGET', names_key, unpack(part))
    for j, name in ipairs(part) do
      if claims[j] and tonumber(changed[name]) > tonumber(claims[j]) then return true end
    end
  end
  return false
end

-- up to n messages, the first staged first, each looked at; returns how many were
local function sift(bodies, heads, queue, ids, n)
  local messages = redis.call('LRANGE', bodies, -n, -1)
  local about = redis.call('LRANGE', heads, -n, -1)
  local gone = {}
  for i = #messages, 1, -1 do
    local claimed, id_len, rest = string.match(about[i], '^(%d+),(%d+):()')
    local id = string.sub(about[i], rest, rest + id_len - 1)
    local when = changed[string.sub(about[i], rest + id_len)]
    if when ~= nil and tonumber(when) > tonumber(claimed) then
      dropped = dropped + 1
      gone[#gone + 1] = id
    else
      redis.call('LPUSH', queue, messages[i])
      pushed = pushed + 1
    end
  end
  if #gone > 0 then redis.call('SREM', ids, unpack(gone)) end
  redis.call('LTRIM', bodies, 0, -#messages - 1)
  redis.call('LTRIM', heads, 0, -#messages - 1)
  return #messages
end

for _, instant in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 16)) do
  local base = prefix .. instant .. ':'
  local queues_key, names_key, ids = base .. 'queues', base .. 'names', base .. 'ids'
  local stale = #changed_names > 0 and any_stale(names_key)
  for _, queue in ipairs(redis.call('SMEMBERS', queues_key)) do
    local bodies, heads = base .. 'q:' .. queue, base .. 'h:' .. queue
    local waiting = redis.call('LLEN', bodies)
    if waiting == 0 then
      -- nothing left (the SREM below was not reached)
    elseif not stale and redis.call('EXISTS', queue) == 0 then
      pushed = pushed + waiting
      redis.call('RENAME', bodies, queue)
    elseif not stale then
      local n = math.min(waiting, most - moved)
      for _ = 1, n do redis.call('LMOVE', bodies, queue, 'RIGHT', 'LEFT') end
      redis.call('LTRIM', heads, 0, -n - 1)
      moved, pushed = moved + n, pushed + n
    else
      while moved < most and redis.call('LLEN', bodies) > 0 do
        moved = moved + sift(bodies, heads, queue, ids, math.min(1000, most - moved))
      end
    end
    if redis.call('LLEN', bodies) == 0 then
      redis.call('UNLINK', heads)
      redis.call('SREM', queues_key, queue)
    end
    if moved >= most then break end
  end
  if redis.call('SCARD', queues_key) > 0 then break end
  redis.call('ZREM', KEYS[1], instant)
  redis.call('HDEL', KEYS[3], instant)
  redis.call('UNLINK', names_key)
  redis.call('PEXPIRE', ids, keep)
end
redis.call('DECRBY', KEYS[2], pushed + dropped)
if tonumber(redis.call('GET', KEYS[2]) or '0') < 0 then redis.call('SET', KEYS[2], 0) end
local more = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1)
return {pushed, dropped, #more}
"""


_COUNT = "return redis.call('GET', KEYS[1])"


def staged_messages(app: Any, key_prefix: str) -> int | None:
    """How many messages wait staged in ``app``'s broker (None: not a Redis broker, or
    it cannot be reached: the broker check says which)."""
    try:
        with app.connection_for_write() as connection:
            channel = connection.default_channel
            if not redis_publish.usable(channel):
                return None
            prefix = global_prefix(channel)
            found = whole_keys(channel).eval(_COUNT, 1, f"{prefix}{key_prefix}:staged:count")
    except Exception:  # the broker check reports an unreachable broker
        return None
    return max(int(found or 0), 0)


def whole_keys(channel: Any) -> redis.Redis:
    """A client of kombu's Redis ``channel`` that names keys as given: kombu's own puts
    its ``global_keyprefix`` in front of some commands' keys (a ZRANGE's, an EVALSHA's
    first), so every key staging names is whole, its prefix written in by the caller."""
    pool = channel.client.connection_pool
    found = _WHOLE.get(id(pool))
    if found is None or found.connection_pool is not pool:
        found = _WHOLE[id(pool)] = redis.Redis(connection_pool=pool)
    return found


_WHOLE: dict[int, redis.Redis] = {}


@contextlib.contextmanager
def on_broker() -> Iterator[None]:
    """Inside, a failure of the broker's Redis is told as the broker's: refused (an
    error reply: out of memory, a script error) or unreachable (connection, timeout),
    never as the schedule's Redis failing.

    Raises:
        BrokerRefusedError: the broker answered with an error.
        BrokerUnavailableError: the broker did not answer.
    """
    try:
        yield
    except redis.ResponseError as error:
        raise BrokerRefusedError(f"broker refused: {error}") from error
    except redis.RedisError as error:
        raise BrokerUnavailableError(f"broker unreachable ({error})") from error


def global_prefix(channel: Any) -> str:
    """kombu's ``global_keyprefix`` of a Redis ``channel`` ("" for none): staging writes it
    into every key it names (see :func:`whole_keys`)."""
    return getattr(channel, "global_keyprefix", "") or ""
