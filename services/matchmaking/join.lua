--[[
join.lua: put a player's ticket in a queue and, when the queue holds enough players, pop a
full group of the oldest tickets, atomically. A popped ticket is "forming" (no longer in the
queue, not cancellable) until matched.lua seats it or requeue.lua puts it back, so a player
is never in two groups and never dropped.

KEYS[1]  queue list         waiting ticket ids, oldest first
KEYS[2]  ticket hash        of the new ticket
KEYS[3]  active ticket key  the player's waiting/forming ticket id
KEYS[4]  expiring zset      ticket id -> expiry ms
KEYS[5]  forming zset       group id -> ms it was popped
KEYS[6]  group hash         of the group this call would form
KEYS[7]  request key        the player's request id -> ticket id

ARGV[1]  ticket id          ARGV[2]  player id        ARGV[3]  game
ARGV[4]  seats              ARGV[5]  stake            ARGV[6]  now ms
ARGV[7]  expiry ms          ARGV[8]  group id         ARGV[9]  ticket key prefix
ARGV[10] request ttl s      ARGV[11] ticket ttl s

Returns
  {"replay", ticket_id}             the request id was answered before: nothing changed
  {"existing", ticket_id}           the player already waits (or is being seated)
  {"waiting", ticket_id}            queued
  {"formed", ticket_id, group_id}   queued and a group was popped (the caller seats it)
]]

local replay = redis.call('GET', KEYS[7])
if replay then
  return {'replay', replay}
end

local existing = redis.call('GET', KEYS[3])
if existing then
  local state = redis.call('HGET', ARGV[9] .. existing, 'state')
  if state == 'waiting' or state == 'forming' then
    redis.call('SET', KEYS[7], existing, 'EX', ARGV[10])
    return {'existing', existing}
  end
end

local tid = ARGV[1]
redis.call('HSET', KEYS[2],
  'player', ARGV[2], 'game', ARGV[3], 'seats', ARGV[4], 'stake', ARGV[5],
  'state', 'waiting', 'created_ms', ARGV[6], 'expire_ms', ARGV[7], 'table_id', '', 'seat', '-1')
redis.call('EXPIRE', KEYS[2], ARGV[11])
redis.call('SET', KEYS[3], tid, 'EX', ARGV[11])
redis.call('SET', KEYS[7], tid, 'EX', ARGV[10])
redis.call('RPUSH', KEYS[1], tid)
redis.call('ZADD', KEYS[4], ARGV[7], tid)

local seats = tonumber(ARGV[4])
if redis.call('LLEN', KEYS[1]) < seats then
  return {'waiting', tid}
end

local popped = redis.call('LPOP', KEYS[1], seats)
local players = {}
for i, id in ipairs(popped) do
  local key = ARGV[9] .. id
  redis.call('HSET', key, 'state', 'forming', 'group', ARGV[8])
  redis.call('ZREM', KEYS[4], id)
  players[i] = redis.call('HGET', key, 'player')
end
redis.call('HSET', KEYS[6],
  'tickets', table.concat(popped, ','), 'players', table.concat(players, ','),
  'game', ARGV[3], 'seats', ARGV[4], 'stake', ARGV[5], 'created_ms', ARGV[6])
redis.call('ZADD', KEYS[5], ARGV[6], ARGV[8])
return {'formed', tid, ARGV[8]}
