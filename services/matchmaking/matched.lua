--[[
matched.lua: seat a formed group: every ticket becomes "matched" with its table and seat,
each player's table is recorded, and watchers are told. Idempotent: a group no longer
forming (already seated) changes nothing.

KEYS[1]  forming zset
KEYS[2]  group hash
then for each of the N players, in seat order: ticket hash, active ticket key, player table key

ARGV[1]  group id     ARGV[2]  table id     ARGV[3]  N
ARGV[4]  player-table ttl s                ARGV[5]  game
ARGV[6]  ticket channel prefix
then the N ticket ids, then the N player ids

Returns 1 when seated now, 0 when the group was already seated.
]]

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local n = tonumber(ARGV[3])
for i = 1, n do
  local tid = ARGV[6 + i]
  local player = ARGV[6 + n + i]
  local base = 2 + 3 * (i - 1)
  redis.call('HSET', KEYS[base + 1], 'state', 'matched', 'table_id', ARGV[2], 'seat', i - 1)
  if redis.call('GET', KEYS[base + 2]) == tid then
    redis.call('DEL', KEYS[base + 2])
  end
  local where = cjson.encode({table_id = ARGV[2], seat = i - 1, game = ARGV[5]})
  redis.call('SET', KEYS[base + 3], where, 'EX', ARGV[4])
  redis.call('PUBLISH', ARGV[6] .. tid, 'matched')
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
