--[[
requeue.lua: put a group whose table could not be created back at the front of its queue,
in its original order, waiting again, all in the queue's slot (the players keep their
reservations). Idempotent: a group no longer forming changes nothing.

KEYS[1]  forming zset     KEYS[2]  group hash     KEYS[3]  queue list     KEYS[4]  expiring zset
then the N ticket hashes, in the group's order

ARGV[1]  group id     ARGV[2]  N     ARGV[3]  ticket channel prefix
then the N ticket ids

Returns 1 when requeued now, 0 when the group was not forming.
]]

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local n = tonumber(ARGV[2])
for i = n, 1, -1 do
  local tid = ARGV[3 + i]
  local key = KEYS[4 + i]
  redis.call('HSET', key, 'state', 'waiting')
  redis.call('HDEL', key, 'group')
  redis.call('LPUSH', KEYS[3], tid)
  redis.call('ZADD', KEYS[4], redis.call('HGET', key, 'expire_ms'), tid)
  redis.call('PUBLISH', ARGV[3] .. tid, 'waiting')
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
