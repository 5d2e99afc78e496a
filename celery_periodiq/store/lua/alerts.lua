-- alerts: hand a beat the alert transitions of one partition to send, none of them lost
-- however the beat or its connection fails: each is sent at least once (twice only
-- when a beat loses a reply or stops mid-send; never dropped).
--
-- "take" moves transitions from the alerts list into the sending set, each with a
-- lease; the beat sends them, then says "sent", which removes them. A transition whose
-- lease ran out (its beat stopped, or lost the reply of "take" or of "sent") is taken
-- again, before newer ones, by whichever beat asks first. "back" puts transitions whose
-- message failed back at the front of the list, in their order (those still taken).
--
-- KEYS[1] alerts   list  transitions not taken yet, oldest first (JSON each)
-- KEYS[2] sending  zset  transitions taken -> lease end (ms) * 1000 + place in the take
-- ARGV[1] "take", "sent" or "back"
-- take: ARGV[2] most transitions (at most 999), ARGV[3] lease (ms),
--       ARGV[4] now (ms) to use instead of the server clock, or "" (tests)
-- sent, back: ARGV[2..] the transitions
--
-- Returns for take the transitions taken, oldest first; for sent and back, how many of
-- the transitions given were still taken.

local alerts, sending = KEYS[1], KEYS[2]
local action = ARGV[1]

if action == 'take' then
  local most, lease = math.min(tonumber(ARGV[2]), 999), tonumber(ARGV[3])
  local now = clock_ms(ARGV[4])
  -- scores written as whole numbers: Redis would give a Lua number 14 digits only
  local ended = string.format('%.0f', now * 1000 + 999)
  local taken = redis.call('ZRANGEBYSCORE', sending, '-inf', ended, 'LIMIT', 0, most)
  if #taken < most then
    local popped = redis.call('LPOP', alerts, most - #taken)
    if popped then
      for _, item in ipairs(popped) do taken[#taken + 1] = item end
    end
  end
  local scored = {}
  for place, item in ipairs(taken) do
    scored[#scored + 1] = string.format('%.0f', (now + lease) * 1000 + place)
    scored[#scored + 1] = item
  end
  chunked('ZADD', sending, scored)
  return taken
end

local found = {}
for i = 2, #ARGV do
  if redis.call('ZREM', sending, ARGV[i]) == 1 then found[#found + 1] = ARGV[i] end
end
if action == 'back' then -- to the front of the list, the first one first
  for i = #found, 1, -1 do redis.call('LPUSH', alerts, found[i]) end
end
return #found
