"""The broker-side scripts of staged release, run in the broker's Redis (see staging.py).

Each staged message is one list item, ``"<staged_at>,<id len>,<key len>,<name len>:"``
then the task id, the queue list's key, the entry's name and the message as kombu's
Redis channel would put it. Per instant ``T`` (ms), under the staging prefix ``S``:

- ``S:at``          zset   instant -> instant: the instants with messages waiting;
- ``S:count``       string how many messages wait, all instants (the cap counts them);
- ``S:T``           list   the messages staged for ``T``, in staging order;
- ``S:T:released``  set    task ids released for ``T`` (a second copy is never pushed);
                           kept an hour after its last release;
- ``S:claimed``     hash   instant -> the earliest claim (ms) of a message staged for it:
                           the changes a release must look at are those made after it.
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
    "staged",
    "staged_messages",
    "whole_keys",
]

STAGE = """
-- KEYS[1] S:at  KEYS[2] S:count  KEYS[3] S:T  KEYS[4] S:claimed
-- ARGV[1] T (ms); ARGV[2] the most messages that may wait; ARGV[3] the earliest claim
-- (ms) of the messages given; ARGV[4..] one item each
-- Returns how many were staged: the first ones given; the others are over the cap.
local waiting = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local room = math.max(tonumber(ARGV[2]) - waiting, 0)
local take = math.min(room, #ARGV - 3)
if take == 0 then return 0 end
for first = 4, take + 3, 1000 do
  redis.call('RPUSH', KEYS[3], unpack(ARGV, first, math.min(first + 999, take + 3)))
end
redis.call('INCRBY', KEYS[2], take)
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[1])
local earliest = tonumber(redis.call('HGET', KEYS[4], ARGV[1]))
if not earliest or tonumber(ARGV[3]) < earliest then
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[3])
end
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
-- ARGV[2] the most messages to look at
-- ARGV[3] JSON {entry name: ms of its last change}: a message whose claim came before
--         its entry's last change is dropped
-- ARGV[4] S (the staging prefix, with ':'); ARGV[5] how long a released set is kept (ms)
-- Only messages of instants up to now are pushed, never one of a later instant; each
-- task id at most once per instant. The instants' lists are named from S (a broker is
-- a single Redis, not a Cluster).
-- Returns {pushed, dropped, 1 if more is due else 0}.
local now, most = tonumber(ARGV[1]), tonumber(ARGV[2])
local changed = cjson.decode(ARGV[3])
local any_changed = next(changed) ~= nil
local prefix, keep = ARGV[4], tonumber(ARGV[5])
local pushed, dropped, seen = 0, 0, 0
local instants = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 16)
for _, instant in ipairs(instants) do
  local list, released = prefix .. instant, prefix .. instant .. ':released'
  local items = redis.call('LRANGE', list, 0, most - seen - 1)
  -- a copy per task id (the first not dropped), then one command per key for them all
  local ids, lists, bodies, taken = {}, {}, {}, {}
  for _, item in ipairs(items) do
    local at, id_len, key_len, name_len, body =
      string.match(item, '^(%d+),(%d+),(%d+),(%d+):()')
    id_len, key_len, name_len = tonumber(id_len), tonumber(key_len), tonumber(name_len)
    local id = string.sub(item, body, body + id_len - 1)
    local rest = body + id_len + key_len
    local stale = false
    if any_changed then
      local when = changed[string.sub(item, rest, rest + name_len - 1)]
      stale = when ~= nil and tonumber(when) > tonumber(at)
    end
    if stale then
      dropped = dropped + 1
    elseif not taken[id] then
      taken[id] = true
      ids[#ids + 1] = id
      lists[#ids] = string.sub(item, body + id_len, rest - 1)
      bodies[#ids] = string.sub(item, rest + name_len)
    end
  end
  if #ids > 0 then
    local known = redis.call('SMISMEMBER', released, unpack(ids))
    local new, by_list = {}, {}
    for i = 1, #ids do
      if known[i] == 0 then
        new[#new + 1] = ids[i]
        local found = by_list[lists[i]]
        if not found then found = {}; by_list[lists[i]] = found end
        found[#found + 1] = bodies[i]
      end
    end
    if #new > 0 then
      redis.call('SADD', released, unpack(new))
      for key, messages in pairs(by_list) do redis.call('LPUSH', key, unpack(messages)) end
      pushed = pushed + #new
    end
  end
  seen = seen + #items
  redis.call('DECRBY', KEYS[2], #items)
  if #items > 0 then redis.call('PEXPIRE', released, keep) end
  if redis.call('LLEN', list) <= #items then
    redis.call('DEL', list)
    redis.call('ZREM', KEYS[1], instant)
    redis.call('HDEL', KEYS[3], instant)
  else
    redis.call('LTRIM', list, #items, -1)
  end
  if seen >= most then break end
end
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


def staged(claimed_ms: int, task_id: str, key: str, name: str, message: str) -> str:
    """A staged message as the release script reads it (see the module's docstring)."""
    sizes = (len(task_id.encode()), len(key.encode()), len(name.encode()))
    return f"{claimed_ms},{sizes[0]},{sizes[1]},{sizes[2]}:{task_id}{key}{name}{message}"


def global_prefix(channel: Any) -> str:
    """kombu's ``global_keyprefix`` of a Redis ``channel`` ("" for none): staging writes it
    into every key it names (see :func:`whole_keys`)."""
    return getattr(channel, "global_keyprefix", "") or ""
