--[[
matched.lua: seat a formed group, in its queue's slot: every ticket becomes "matched" with
its table and seat, and watchers are told. Idempotent: a group no longer forming (already
seated) changes nothing. The caller has recorded each player's table (his own slot) before,
so a watcher told "matched" finds his table with GetMyTable, and releases each player's
reservation after.

KEYS[1]  forming zset
KEYS[2]  group hash
then the N ticket hashes, in seat order

ARGV[1]  group id     ARGV[2]  table id     ARGV[3]  N
ARGV[4]  ticket channel prefix
then the N ticket ids

Returns 1 when seated now, 0 when the group was already seated.
]]

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local n = tonumber(ARGV[3])
for i = 1, n do
  local tid = ARGV[4 + i]
  redis.call('HSET', KEYS[2 + i], 'state', 'matched', 'table_id', ARGV[2], 'seat', i - 1)
  redis.call('PUBLISH', ARGV[4] .. tid, 'matched')
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
