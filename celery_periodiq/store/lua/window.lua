-- window: add, change or remove one maintenance window, and record the change in the
-- windows' audit trail (see _common.lua) in the same call: no window change escapes
-- the trail, and none is recorded that did not happen.
--
-- KEYS[1] windows             hash  window id -> its JSON (model/windows.py)
-- KEYS[2] windows_audit       hash  window id -> its audit trail, newest first
-- KEYS[3] windows_audit_newest  zset  window id -> when its newest audit record was
--                                     written (ms)
-- ARGV[1] "add" (only when no window has the id), "replace" (add, or change the one of
--         that id) or "remove"
-- ARGV[2] the window id
-- ARGV[3] the window's JSON (add, replace; "" for remove)
-- ARGV[4] the audit context (see _common.lua): recorded as "add_window",
--         "update_window" (detail: the changed fields) or "remove_window"
--
-- Returns 1 when the window was written or removed (a replace by the same JSON writes
-- nothing and records nothing), 0 when not: an add whose id is taken, a remove of no
-- window.

local windows = KEYS[1]
local action, id, text = ARGV[1], ARGV[2], ARGV[3]
local now = clock_ms('')
audit_context(ARGV[4], KEYS[2], KEYS[3])
local old = redis.call('HGET', windows, id)

if action == 'remove' then
  if not old then return 0 end
  redis.call('HDEL', windows, id)
  audit(id, now, 'remove_window')
  return 1
end

if old and action ~= 'replace' then return 0 end
if old == text then return 1 end
redis.call('HSET', windows, id, text)
if old then
  audit(id, now, 'update_window', nil, definition_changes(old, text))
else
  audit(id, now, 'add_window')
end
return 1
