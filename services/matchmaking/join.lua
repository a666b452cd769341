--[[
join.lua: make a reserved ticket (claim.lua reserved it in the player's slot) and put it in
its queue; when the queue holds enough players, pop a full group of the oldest tickets, all
atomically in the queue's slot. A popped ticket is "forming" (no longer in the queue, not
cancellable) until matched.lua seats it or requeue.lua puts it back, so a player is never in
two groups and never dropped.

Idempotent: any number of callers may run it for one reservation (the one who reserved it,
a retry, the player's next request after a crash), and a ticket is made at most once. A
reservation whose ticket should be expired by now, or whose join was given up ("abort"),
gets an ended ticket instead (a tombstone), so it can never be made later.

KEYS[1]  queue list         waiting ticket ids, oldest first
KEYS[2]  ticket hash        of the reserved ticket (with its player's name and seed)
KEYS[3]  expiring zset      ticket id -> expiry ms
KEYS[4]  forming zset       group id -> ms it was popped
KEYS[5]  group hash         of the group this call would form

ARGV[1]  ticket id          ARGV[2]  player id        ARGV[3]  game
ARGV[4]  seats              ARGV[5]  stake            ARGV[6]  created ms
ARGV[7]  expiry ms          ARGV[8]  now ms           ARGV[9]  group id
ARGV[10] ticket key prefix  ARGV[11] ticket ttl s     ARGV[12] name
ARGV[13] client seed        ARGV[14] "join" or "abort"
ARGV[15] contributes ("1": the player's client contributes to every deal, docs/fairness.md)

Returns
  {"exists", state}            the ticket was made before: nothing changed
  {"ended", state}             a tombstone was written ("cancelled" for abort, else "expired")
  {"waiting", ""}              queued
  {"formed", group_id}         queued and a group was popped (the caller seats it)
]]

local existing = redis.call('HGET', KEYS[2], 'state')
if existing then
  return {'exists', existing}
end

local tid = ARGV[1]
local state = 'waiting'
if ARGV[14] == 'abort' then
  state = 'cancelled'
elseif tonumber(ARGV[8]) >= tonumber(ARGV[7]) then
  state = 'expired'
end
redis.call('HSET', KEYS[2],
  'player', ARGV[2], 'game', ARGV[3], 'seats', ARGV[4], 'stake', ARGV[5],
  'state', state, 'created_ms', ARGV[6], 'expire_ms', ARGV[7], 'table_id', '', 'seat', '-1',
  'name', ARGV[12], 'client_seed', ARGV[13], 'contributes', ARGV[15] or '0')
redis.call('EXPIRE', KEYS[2], ARGV[11])
if state ~= 'waiting' then
  return {'ended', state}
end
redis.call('RPUSH', KEYS[1], tid)
redis.call('ZADD', KEYS[3], ARGV[7], tid)

local seats = tonumber(ARGV[4])
if redis.call('LLEN', KEYS[1]) < seats then
  return {'waiting', ''}
end

local popped = redis.call('LPOP', KEYS[1], seats)
local players = {}
for i, id in ipairs(popped) do
  local key = ARGV[10] .. id
  redis.call('HSET', key, 'state', 'forming', 'group', ARGV[9])
  redis.call('ZREM', KEYS[3], id)
  players[i] = redis.call('HGET', key, 'player')
end
redis.call('HSET', KEYS[5],
  'tickets', table.concat(popped, ','), 'players', table.concat(players, ','),
  'game', ARGV[3], 'seats', ARGV[4], 'stake', ARGV[5], 'created_ms', ARGV[8])
redis.call('ZADD', KEYS[4], ARGV[8], ARGV[9])
return {'formed', ARGV[9]}
